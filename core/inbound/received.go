package inbound

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/postmill/postmill/ports"
)

// ListReceived implements ports.InboundService: newest first, limit 1-100 (default 25), offset ≥ 0.
func (s *Service) ListReceived(ctx context.Context, orgID string, limit, offset int) ([]ports.ReceivedEmail, error) {
	if limit == 0 {
		limit = ports.DefaultListLimit
	}
	var v []ports.FieldViolation
	if limit < 1 || limit > ports.MaxListLimit {
		v = append(v, ports.FieldViolation{Path: "limit", Message: "must be between 1 and 100"})
	}
	if offset < 0 {
		v = append(v, ports.FieldViolation{Path: "offset", Message: "must be at least 0"})
	}
	if len(v) > 0 {
		return nil, ports.ValidationError(v...)
	}
	return s.deps.Store.ListReceived(ctx, orgID, limit, offset)
}

// GetReceived implements ports.InboundService.
func (s *Service) GetReceived(ctx context.Context, orgID, id string) (ports.ReceivedEmail, error) {
	return s.deps.Store.GetReceived(ctx, orgID, id)
}

// ReceivedRaw implements ports.InboundService.
func (s *Service) ReceivedRaw(ctx context.Context, orgID, id string) ([]byte, error) {
	e, err := s.deps.Store.GetReceived(ctx, orgID, id)
	if err != nil {
		return nil, err
	}
	raw, err := s.deps.Blobs.Get(ctx, e.RawKey)
	if ports.ErrorCode(err) == ports.CodeNotFound {
		return nil, ports.NotFound("raw message not found")
	}
	return raw, err
}

// ReceivedAttachment implements ports.InboundService: the bytes only when the attachment's scan is clean.
func (s *Service) ReceivedAttachment(ctx context.Context, orgID, id, attID string) (ports.ReceivedAttachment, []byte, error) {
	e, err := s.deps.Store.GetReceived(ctx, orgID, id)
	if err != nil {
		return ports.ReceivedAttachment{}, nil, err
	}
	for _, a := range e.Attachments {
		if a.ID != attID {
			continue
		}
		if a.ScanStatus != ports.ScanClean {
			return a, nil, ports.Errorf(ports.CodePermissionDenied, "attachment scan status is %s: download refused", a.ScanStatus)
		}
		var raw []byte
		data, err := s.attachmentBytes(ctx, e, a, &raw)
		return a, data, err
	}
	return ports.ReceivedAttachment{}, nil, ports.NotFound("attachment not found")
}

// attachmentBytes finds a clean attachment's bytes: an attachment received before the raw message became
// the only blob written is an object of its own (BlobKey); any other is derived from the raw message (read
// once into *raw and kept there for the email's other attachments) at its part path, and served only when
// its size and SHA-256 are those recorded at receipt. A raw message whose bytes changed since is an error,
// never different bytes. Errors: not_found (no stored object), internal (a mismatch).
func (s *Service) attachmentBytes(ctx context.Context, e ports.ReceivedEmail, a ports.ReceivedAttachment, raw *[]byte) ([]byte, error) {
	if a.BlobKey != "" {
		data, err := s.deps.Blobs.Get(ctx, a.BlobKey)
		if ports.ErrorCode(err) == ports.CodeNotFound {
			return nil, ports.NotFound("attachment not found")
		}
		return data, err
	}
	if a.PartPath == "" {
		return nil, ports.NotFound("attachment not found")
	}
	if s.deps.Parts == nil {
		return nil, fmt.Errorf("inbound: attachment %s is a part of the raw message and this process cannot read parts", a.ID)
	}
	if *raw == nil {
		b, err := s.deps.Blobs.Get(ctx, e.RawKey)
		if ports.ErrorCode(err) == ports.CodeNotFound {
			return nil, ports.NotFound("attachment not found")
		}
		if err != nil {
			return nil, err
		}
		*raw = b
	}
	data, err := s.deps.Parts.Extract(ctx, *raw, a.PartPath)
	if err != nil {
		err = fmt.Errorf("inbound: attachment %s of received email %s: part %s: %w", a.ID, e.ID, a.PartPath, err)
	} else if int64(len(data)) != a.Size || a.SHA256 == "" || sha256Hex(data) != a.SHA256 {
		err = fmt.Errorf("inbound: attachment %s of received email %s: part %s is %d bytes that do not match the %d bytes "+
			"and checksum recorded at receipt: refusing to serve them", a.ID, e.ID, a.PartPath, len(data), a.Size)
	}
	if err != nil {
		// Not a not_found: the attachment exists, but the raw message no longer gives its bytes. Neither the
		// parser's code nor the stored raw message may change under a received email; this says one did.
		s.deps.Logger.ErrorContext(ctx, "inbound attachment cannot be derived from its raw message",
			slog.String("error", err.Error()))
		return nil, ports.Errorf(ports.CodeInternal, "attachment %s cannot be read from its message", a.ID)
	}
	return data, nil
}
