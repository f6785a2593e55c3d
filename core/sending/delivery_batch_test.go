package sending

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/ports"
)

const (
	batchOrg = "0193d6d0-0000-7000-8000-0000000000b1"
	batchDom = "0193d6d0-0000-7000-8000-0000000000b2"
)

// batchStore holds messages by id and records the applications it is asked for.
type batchStore struct {
	ports.DeliveryStore
	domain   ports.Domain
	messages map[string]ports.Message
	mu       sync.Mutex
	applied  map[string]ports.DeliveryApplication
}

func (f *batchStore) OutboundData(_ context.Context, orgID, messageID string) (ports.Message, ports.Domain, error) {
	m, ok := f.messages[messageID]
	if !ok || orgID != batchOrg {
		return ports.Message{}, ports.Domain{}, ports.NotFound("message not found")
	}
	return m, f.domain, nil
}

func (f *batchStore) ApplyDeliveryReport(_ context.Context, jobID, orgID, messageID string, decide func([]ports.Recipient) ports.DeliveryApplication) (bool, error) {
	m, ok := f.messages[messageID]
	if !ok || orgID != batchOrg {
		return false, ports.NotFound("message not found")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, done := f.applied[jobID]; done {
		return false, nil
	}
	f.applied[jobID] = decide(m.Recipients)
	return true, nil
}

// TestDeliveryBatches: LoadOutbounds and ReportDeliveries answer every item as LoadOutbound and
// ReportDelivery would, in the order asked, a missing message failing only its own item.
func TestDeliveryBatches(t *testing.T) {
	t.Parallel()
	kr, err := secret.NewKeyring([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := kr.Seal([]byte("not really a key"), []byte(batchDom))
	if err != nil {
		t.Fatal(err)
	}
	st := &batchStore{
		domain:   ports.Domain{ID: batchDom, OrganizationID: batchOrg, Name: "acme.example", DKIMSelector: "pm1", DKIMPrivateKey: sealed},
		messages: map[string]ports.Message{},
		applied:  map[string]ports.DeliveryApplication{},
	}
	var jobs []ports.DeliveryJob
	for i, id := range []string{"0193d6d0-0000-7000-8000-000000000001", "0193d6d0-0000-7000-8000-000000000002", "0193d6d0-0000-7000-8000-000000000003"} {
		rid := fmt.Sprintf("0193d6d0-0000-7000-8000-00000000010%d", i)
		if i != 1 { // the second message is gone
			st.messages[id] = ports.Message{ID: id, OrganizationID: batchOrg, Status: ports.StatusQueued, From: "a@acme.example",
				Recipients: []ports.Recipient{{ID: rid, Type: ports.RecipientTo, Address: "r@x.example", Status: ports.StatusQueued}}}
		}
		jobs = append(jobs, ports.DeliveryJob{ID: fmt.Sprintf("0193d6d0-0000-7000-8000-00000000020%d", i), OrganizationID: batchOrg, MessageID: id, Domain: "x.example",
			RecipientIDs: []string{rid}, Attempt: 1, FirstQueuedAt: orderNow})
	}
	kr2, _ := secret.NewKeyring([]byte("0123456789abcdef0123456789abcdef"))
	svc, err := New(Config{}, Deps{
		Messages: fakeMessages{}, Domains: fakeDomains{}, Organizations: fakeOrganizations{}, Outbox: fakeOutbox{},
		Delivery: st, Queue: fakeQueue{}, Blobs: fakeBlobs{}, Scanner: fakeScanner{}, Keyring: kr2, Clock: fixedClock{orderNow},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	results, err := svc.LoadOutbounds(ctx, jobs)
	if err != nil || len(results) != len(jobs) {
		t.Fatalf("LoadOutbounds = %d results, %v", len(results), err)
	}
	for i, r := range results {
		single, serr := svc.LoadOutbound(ctx, jobs[i])
		if ports.ErrorCode(r.Err) != ports.ErrorCode(serr) || r.Message.MessageID != single.MessageID ||
			r.Message.ReturnPath != single.ReturnPath || string(r.Message.DKIMPrivateKey) != string(single.DKIMPrivateKey) {
			t.Errorf("job %d: batch answer %+v / %v differs from the single one %v", i, r.Message.MessageID, r.Err, serr)
		}
	}
	if ports.ErrorCode(results[1].Err) != ports.CodeNotFound || results[0].Err != nil || results[2].Err != nil {
		t.Fatalf("errors %v, %v, %v; want only the second not_found", results[0].Err, results[1].Err, results[2].Err)
	}
	if results[2].Message.Job.ID != jobs[2].ID || string(results[2].Message.DKIMPrivateKey) != "not really a key" {
		t.Fatalf("third result %+v is not the third job's", results[2].Message.Job)
	}

	var reports []ports.DeliveryReport
	for _, j := range jobs {
		reports = append(reports, ports.DeliveryReport{Job: j, Handed: true, At: orderNow.Add(time.Second),
			Recipients: []ports.RecipientOutcome{{RecipientID: j.RecipientIDs[0], Kind: ports.OutcomeDelivered, Response: "250 ok"}}})
	}
	errs, err := svc.ReportDeliveries(ctx, reports)
	if err != nil || len(errs) != len(reports) {
		t.Fatalf("ReportDeliveries = %v, %v", errs, err)
	}
	for i, e := range errs {
		if e != nil {
			t.Errorf("report %d: %v", i, e) // a report for a message that no longer exists is dropped, as ReportDelivery does
		}
	}
	if len(st.applied) != 2 || st.applied[jobs[0].ID].Recipients[jobs[0].RecipientIDs[0]] != ports.StatusDelivered {
		t.Fatalf("applied %v; want the two existing messages delivered", st.applied)
	}
	if _, err := svc.LoadOutbounds(ctx, make([]ports.DeliveryJob, maxBatchJobs+1)); ports.ErrorCode(err) != ports.CodeInvalidArgument {
		t.Fatalf("an oversized batch: %v, want invalid_argument", err)
	}
}
