package kafka_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/postmill/postmill/adapters/kafka"
	"github.com/postmill/postmill/ports"
)

func TestEventStreamKeysByMessageAndKeepsOrder(t *testing.T) {
	t.Parallel()
	brokers := newCluster(t)
	cfg := config(t, brokers, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := kafka.NewEventStream(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)

	resp := "250 2.0.0 Ok"
	now := time.Now().UTC().Truncate(time.Microsecond)
	events := []ports.Event{
		{ID: "e1", OrganizationID: "o", Type: ports.EventEmailQueued, MessageID: "m1", OccurredAt: now},
		{ID: "e2", OrganizationID: "o", Type: ports.EventDomainCreated, DomainID: "d1", OccurredAt: now},
		{ID: "e3", OrganizationID: "o", Type: ports.EventEmailDelivered, MessageID: "m1", RecipientID: "r1", ProviderResponse: &resp, OccurredAt: now},
		{ID: "e4", OrganizationID: "o", Type: ports.EventEmailClicked, MessageID: "m1", RecipientID: "r1", URL: "https://example.com/a", LinkID: "2", OccurredAt: now},
	}
	if err := s.Publish(ctx, events); err != nil {
		t.Fatal(err)
	}
	if err := s.Publish(ctx, nil); err != nil {
		t.Fatalf("publishing nothing: %v", err)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(cfg.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	type got struct {
		key, id string
		part    int32
		rec     map[string]any
	}
	var recs []got
	for len(recs) < 4 && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			var m map[string]any
			if err := json.Unmarshal(r.Value, &m); err != nil {
				t.Errorf("record value: %v", err)
			}
			recs = append(recs, got{key: string(r.Key), id: m["id"].(string), part: r.Partition, rec: m})
		})
	}
	if len(recs) != 4 {
		t.Fatalf("read %d records", len(recs))
	}
	byID := map[string]got{}
	var m1Order []string
	for _, r := range recs {
		byID[r.id] = r
		if r.key == "m1" {
			m1Order = append(m1Order, r.id)
		}
	}
	if byID["e1"].key != "m1" || byID["e2"].key != "d1" || byID["e1"].part != byID["e3"].part {
		t.Errorf("keys or partitions: %+v", byID)
	}
	if len(m1Order) != 3 || m1Order[0] != "e1" || m1Order[1] != "e3" || m1Order[2] != "e4" {
		t.Errorf("one message's events out of order: %v", m1Order)
	}
	if e3 := byID["e3"].rec; e3["provider_response"] != resp || e3["recipient_id"] != "r1" || e3["type"] != "email.delivered" {
		t.Errorf("record e3: %v", e3)
	}
	if e4 := byID["e4"].rec; e4["url"] != "https://example.com/a" || e4["link_id"] != "2" {
		t.Errorf("click record e4: %v", e4)
	}
	if _, ok := byID["e3"].rec["url"]; ok {
		t.Error("absent url encoded")
	}
	if _, ok := byID["e1"].rec["provider_response"]; ok {
		t.Error("absent provider_response encoded")
	}
}
