package webhook_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"

	"github.com/postmill/postmill/adapters/webhook"
	"github.com/postmill/postmill/ports"
)

// BenchmarkSend posts to an allow-listed local receiver from many goroutines, as the dispatcher does, and
// reports requests per second. "name" includes the per-attempt DNS lookup the guard requires; "literal"
// shows the cost of the HTTP side alone.
func BenchmarkSend(b *testing.B) {
	bd := setup(b, webhook.Config{})
	port, lns := listenSamePort(b, loopback1)
	newReceiver(b, lns[0], func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }).start(b)
	bd.dns.SetA("bench.example.test", loopback1)

	body := []byte(`{"id":"3b1f6f0e-8f55-4c1d-9d7e-0c9d1f1b2a3c","type":"email.delivered","created_at":"2026-01-02T03:04:05Z","data":{"message_id":"0b6b2f9e-7d2c-4d8e-9a51-6f3b7c1d2e4f"}}`)
	headers := map[string]string{
		"content-type":        "application/json",
		"user-agent":          "Service-Webhooks/1",
		"x-service-event":     "email.delivered",
		"x-service-event-id":  "3b1f6f0e-8f55-4c1d-9d7e-0c9d1f1b2a3c",
		"x-service-delivery":  "9c0e",
		"x-service-signature": "t=1700000000,v1=00",
	}
	for _, bc := range []struct{ name, host string }{
		{"name", "bench.example.test"},
		{"literal", "127.0.0.1"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			req := ports.WebhookRequest{URL: "http://" + bc.host + ":" + strconv.Itoa(port) + "/hook", Headers: headers, Body: body}
			b.SetParallelism(16) // requests in flight per core, like the dispatcher's concurrency
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := bd.sender.Send(context.Background(), req)
					if err != nil || resp.StatusCode != http.StatusNoContent {
						b.Errorf("Send = %+v, %v", resp, err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
}
