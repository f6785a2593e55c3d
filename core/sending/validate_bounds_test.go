package sending

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/postmill/postmill/ports"
)

// TestValidateSendBounds checks each bound of ports/limits.go at its value (accepted) and one past it
// (refused with the field's path and a message naming the bound), so that no field of a send is unbounded.
func TestValidateSendBounds(t *testing.T) {
	t.Parallel()
	addrs := func(n int, domain string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("r%d@%s", i, domain)
		}
		return out
	}
	entries := func(n int) map[string]string {
		m := make(map[string]string, n)
		for i := range n {
			m[fmt.Sprintf("K%03d", i)] = "v"
		}
		return m
	}
	metadata := func(n int) json.RawMessage { // a JSON object of exactly n bytes
		return json.RawMessage(`{"a":"` + strings.Repeat("x", n-8) + `"}`)
	}
	att := func(mut func(*ports.Attachment)) []ports.Attachment {
		a := ports.Attachment{Filename: "a.pdf", ContentType: "application/pdf", Content: []byte("%PDF")}
		mut(&a)
		return []ports.Attachment{a}
	}
	tests := []struct {
		name string
		mut  func(*ports.SendRequest)
		want []ports.FieldViolation
	}{
		{"50 recipients across to, cc and bcc", func(r *ports.SendRequest) {
			r.To, r.Cc, r.Bcc = addrs(20, "a.example"), addrs(20, "b.example"), addrs(10, "c.example")
		}, nil},
		{"51 recipients", func(r *ports.SendRequest) {
			r.To, r.Cc, r.Bcc = addrs(20, "a.example"), addrs(20, "b.example"), addrs(11, "c.example")
		}, []ports.FieldViolation{{Path: "", Message: "to, cc and bcc must hold at most 50 addresses together"}}},
		{"51 recipients in to alone", func(r *ports.SendRequest) { r.To = addrs(51, "a.example") },
			[]ports.FieldViolation{{Path: "", Message: "to, cc and bcc must hold at most 50 addresses together"}}},

		{"subject of 998 characters", func(r *ports.SendRequest) { r.Subject = strings.Repeat("é", 998) }, nil},
		{"subject of 999 characters", func(r *ports.SendRequest) { r.Subject = strings.Repeat("s", 999) },
			[]ports.FieldViolation{{Path: "subject", Message: "must be at most 998 characters"}}},

		{"html and text of 5 MiB", func(r *ports.SendRequest) {
			r.HTML, r.Text = strings.Repeat("h", 5<<20), strings.Repeat("t", 5<<20)
		}, nil},
		{"html and text over 5 MiB", func(r *ports.SendRequest) {
			r.HTML, r.Text = strings.Repeat("h", 5<<20+1), strings.Repeat("t", 5<<20+1)
		}, []ports.FieldViolation{{Path: "html", Message: "must be at most 5 MiB"}, {Path: "text", Message: "must be at most 5 MiB"}}},

		{"50 tags of 256 characters", func(r *ports.SendRequest) {
			r.Tags = entries(50)
			r.Tags["K000"] = strings.Repeat("v", 256)
			r.Tags[strings.Repeat("k", 256)] = "v"
			delete(r.Tags, "K001")
		}, nil},
		{"51 tags", func(r *ports.SendRequest) { r.Tags = entries(51) },
			[]ports.FieldViolation{{Path: "tags", Message: "must hold at most 50 entries"}}},
		{"tag value over 256 characters", func(r *ports.SendRequest) { r.Tags = map[string]string{"k": strings.Repeat("v", 257)} },
			[]ports.FieldViolation{{Path: "tags.k", Message: "must be at most 256 characters"}}},
		{"tag key over 256 characters, never echoed", func(r *ports.SendRequest) { r.Tags = map[string]string{strings.Repeat("k", 257): "v"} },
			[]ports.FieldViolation{{Path: "tags", Message: "keys must be at most 256 characters"}}},

		{"metadata of 16 KiB", func(r *ports.SendRequest) { r.Metadata = metadata(16 << 10) }, nil},
		{"metadata over 16 KiB", func(r *ports.SendRequest) { r.Metadata = metadata(16<<10 + 1) },
			[]ports.FieldViolation{{Path: "metadata", Message: "must be at most 16 KiB as JSON"}}},

		{"50 headers, one a full line", func(r *ports.SendRequest) {
			r.Headers = entries(50)
			r.Headers["K000"] = strings.Repeat("v", 998-len("K000: "))
		}, nil},
		{"51 headers", func(r *ports.SendRequest) { r.Headers = entries(51) },
			[]ports.FieldViolation{{Path: "headers", Message: "must hold at most 50 entries"}}},
		{"header line over 998 characters", func(r *ports.SendRequest) {
			r.Headers = map[string]string{"X-Long": strings.Repeat("v", 998-len("X-Long: ")+1)}
		}, []ports.FieldViolation{{Path: "headers.X-Long", Message: "must fit one 998-character header line with its name (RFC 5322 §2.1.1)"}}},
		{"header name over a line, never echoed", func(r *ports.SendRequest) {
			r.Headers = map[string]string{"X-" + strings.Repeat("n", 997): "v"}
		}, []ports.FieldViolation{{Path: "headers", Message: "names must be at most 996 characters"}}},

		{"attachment fields of 255 characters", func(r *ports.SendRequest) {
			r.Attachments = att(func(a *ports.Attachment) {
				a.Filename, a.ContentType, a.ContentID = strings.Repeat("f", 255), strings.Repeat("c", 255), strings.Repeat("i", 255)
			})
		}, nil},
		{"attachment fields over 255 characters", func(r *ports.SendRequest) {
			r.Attachments = att(func(a *ports.Attachment) {
				a.Filename, a.ContentType, a.ContentID = strings.Repeat("f", 256), strings.Repeat("c", 256), strings.Repeat("i", 256)
			})
		}, []ports.FieldViolation{
			{Path: "attachments.0.filename", Message: "must be at most 255 characters"},
			{Path: "attachments.0.contentType", Message: "must be at most 255 characters"},
			{Path: "attachments.0.contentId", Message: "must be at most 255 characters"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := validRequest()
			tc.mut(&req)
			_, got := validateSend(req)
			if !slices.Equal(got, tc.want) {
				t.Errorf("violations %+v, want %+v", got, tc.want)
			}
		})
	}
}
