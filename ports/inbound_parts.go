package ports

import "context"

// MessageParts derives an attachment's bytes from the raw message it came in, so that only the raw message
// needs to be stored when mail is received. It is implemented next to the MIME parser that assigned the
// part paths (the inbound tier), and the core never reads MIME itself.
type MessageParts interface {
	// Extract returns the decoded bytes of the attachment or inline part at partPath (as the parser
	// recorded it in InboundPart.PartPath) of raw. The same raw bytes and path always give the same
	// bytes. Errors: not_found (no such part in raw).
	Extract(ctx context.Context, raw []byte, partPath string) ([]byte, error)
}
