package mta

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

type benchBlobs map[string][]byte

func (b benchBlobs) Put(context.Context, string, []byte, string) error { return nil }
func (b benchBlobs) Delete(context.Context, string) error              { return nil }
func (b benchBlobs) Get(_ context.Context, key string) ([]byte, error) {
	if d, ok := b[key]; ok {
		return d, nil
	}
	return nil, ports.NotFound("blob not found")
}

// benchMessage is a typical transactional message: text and HTML (about 6 KB), one 20 KB attachment.
func benchMessage(tb testing.TB) (ports.OutboundMessage, ports.BlobStore) {
	tb.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	blob := make([]byte, 20<<10)
	_, _ = rand.Read(blob)
	return ports.OutboundMessage{
		Job:             ports.DeliveryJob{ID: "job", Domain: "rcpt.test"},
		MessageID:       "0190f0a0-0000-7000-8000-000000000001",
		From:            "Acme <news@acme.test>",
		To:              []string{"ann@rcpt.test"},
		ReplyTo:         "support@acme.test",
		Subject:         "Your receipt — order 1234",
		Text:            strings.Repeat("Thank you for your order. ", 100),
		HTML:            "<html><body>" + strings.Repeat("<p>Thank you for your order.</p>", 100) + "</body></html>",
		Headers:         map[string]string{"List-Unsubscribe": "<https://acme.test/u/abc>", "List-Unsubscribe-Post": "List-Unsubscribe=One-Click"},
		Recipients:      []ports.Recipient{{ID: "r1", Type: ports.RecipientTo, Address: "ann@rcpt.test"}},
		Attachments:     []ports.StoredAttachment{{ID: "a1", Filename: "receipt.pdf", ContentType: "application/pdf", Key: "k1"}},
		CreatedAt:       time.Now(),
		DKIMDomain:      "acme.test",
		DKIMSelector:    "pm0123456789",
		DKIMPrivateKey:  der,
		ReturnPath:      "b-token@bounce.acme.test",
		MessageIDHeader: "0190f0a0-0000-7000-8000-000000000001@acme.test",
	}, benchBlobs{"k1": blob}
}

// BenchmarkBuildAndSign measures what the tier spends per message before SMTP: MIME build with go-message
// and an RSA-2048 DKIM signature (the parsed key is cached as in production).
func BenchmarkBuildAndSign(b *testing.B) {
	out, blobs := benchMessage(b)
	m, err := New(Config{}, Deps{Queue: nopQueue{}, Delivery: nopDelivery{}, Blobs: blobs, Resolver: nopResolver{}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	var size int
	for b.Loop() {
		data, err := m.message(ctx, out)
		if err != nil {
			b.Fatal(err)
		}
		size = len(data)
	}
	b.ReportMetric(float64(size), "bytes/msg")
}

// BenchmarkBuildAndSignParallel is BenchmarkBuildAndSign on every core, as the MTA's workers run it.
func BenchmarkBuildAndSignParallel(b *testing.B) {
	out, blobs := benchMessage(b)
	m, err := New(Config{}, Deps{Queue: nopQueue{}, Delivery: nopDelivery{}, Blobs: blobs, Resolver: nopResolver{}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := m.message(ctx, out); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

type nopQueue struct{}

func (nopQueue) Publish(context.Context, []ports.DeliveryJob) error     { return nil }
func (nopQueue) Receive(context.Context, int) ([]ports.Delivery, error) { return nil, nil }

type nopDelivery struct{}

func (nopDelivery) LoadOutbound(context.Context, ports.DeliveryJob) (ports.OutboundMessage, error) {
	return ports.OutboundMessage{}, nil
}
func (nopDelivery) ReportDelivery(context.Context, ports.DeliveryReport) error { return nil }

type nopResolver struct{}

func (nopResolver) LookupTXT(context.Context, string) ([]string, error)    { return nil, nil }
func (nopResolver) LookupCNAME(context.Context, string) (string, error)    { return "", nil }
func (nopResolver) LookupMX(context.Context, string) ([]ports.MX, error)   { return nil, nil }
func (nopResolver) LookupIP(context.Context, string) ([]netip.Addr, error) { return nil, nil }
