package inbound

import (
	"bytes"
	"context"

	"github.com/emersion/go-message"

	"github.com/postmill/postmill/ports"
)

// Parts implements ports.MessageParts with the MIME walk that parsed the message when it arrived: the core
// keeps only the raw message and a part path per attachment, and asks Parts for an attachment's bytes when
// they are downloaded or forwarded. It holds no state; the composition root hands it to the core.
type Parts struct{}

var _ ports.MessageParts = Parts{}

// Extract implements ports.MessageParts: it walks raw exactly as parseMail did (the same bounds, the same
// numbering, the same decoding) and returns the attachment whose PartPath is partPath. Errors: not_found.
func (Parts) Extract(ctx context.Context, raw []byte, partPath string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if partPath == "" {
		return nil, ports.NotFound("message part not found")
	}
	e, _ := message.Read(bytes.NewReader(raw))
	if e == nil {
		return nil, ports.NotFound("message part %s not found", partPath)
	}
	m := ports.InboundMessage{}
	w := walker{m: &m}
	w.walk(e, "", true, 0)
	for _, p := range m.Attachments {
		if p.PartPath == partPath {
			return p.Data, nil
		}
	}
	return nil, ports.NotFound("message part %s not found", partPath)
}
