package sending

import (
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

// The send path's pure part, measured apart from the store: go test -bench . -benchmem ./core/sending

func BenchmarkValidateSend(b *testing.B) {
	req := validRequest()
	req.Cc = []string{"c@example.com"}
	req.Headers = map[string]string{"X-Campaign": "spring"}
	req.Tags = map[string]string{"kind": "welcome"}
	for b.Loop() {
		if _, v := validateSend(req); len(v) != 0 {
			b.Fatal(v)
		}
	}
}

func BenchmarkAcceptMessage(b *testing.B) {
	a := acceptance{
		messageID: "msg", orgID: "org", domainID: "dom", now: time.Now(),
		req:        validRequest(),
		recipients: []ports.Recipient{{ID: "r1", Type: "to", Address: "alice@example.com"}},
	}
	for b.Loop() {
		acceptMessage(a, newID)
	}
}

func BenchmarkEncodeVERP(b *testing.B) {
	for b.Loop() {
		EncodeVERP(verpTestKey, VERPRecipient, testRecipientID, "acme.example")
	}
}
