package inbound

import (
	"context"

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
		if a.BlobKey == "" {
			return a, nil, ports.NotFound("attachment not found")
		}
		data, err := s.deps.Blobs.Get(ctx, a.BlobKey)
		if ports.ErrorCode(err) == ports.CodeNotFound {
			return a, nil, ports.NotFound("attachment not found")
		}
		return a, data, err
	}
	return ports.ReceivedAttachment{}, nil, ports.NotFound("attachment not found")
}
