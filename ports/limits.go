package ports

import "fmt"

// Bounds of the send body that SPEC §8 leaves open. SPEC §8's own numbers (attachments, batch size) are in
// sending.go. Exceeding one is a 400 with the field's path, like every bound of SPEC §8; docs/decisions.md
// says where each number comes from.
const (
	// MaxRecipients bounds to, cc and bcc together, as the major providers do (50).
	MaxRecipients = 50
	// MaxSubjectChars is RFC 5322 §2.1.1's line length, the bound SPEC §8 gives a broadcast subject.
	MaxSubjectChars = 998
	// MaxBodyPartBytes bounds html and text, each, in UTF-8 bytes.
	MaxBodyPartBytes = 5 << 20
	// MaxTags bounds the entries of tags; MaxTagChars each key and each value.
	MaxTags     = 50
	MaxTagChars = 256
	// MaxMetadataBytes bounds metadata as the JSON text received.
	MaxMetadataBytes = 16 << 10
	// MaxHeaders bounds the custom headers of one send; MaxHeaderLineChars the line each makes ("Name: value",
	// RFC 5322 §2.1.1).
	MaxHeaders         = 50
	MaxHeaderLineChars = 998
	// MaxAttachmentFieldChars bounds an attachment's filename, contentType and contentId.
	MaxAttachmentFieldChars = 255
)

// Resources with a per-organization count bound, as named in the `resource` field of a refusal.
const (
	ResourceDomains  = "domains"
	ResourceWebhooks = "webhooks"
	ResourceAPIKeys  = "api_keys"
)

// ReasonResourceLimit is the error word of a create refused because the organization already holds as many
// of the resource as the deployment allows.
const ReasonResourceLimit = "resource_limit_reached"

// ResourceLimitReached is the 403 of a create that would take an organization past a configured count. The
// message says the limit and how to raise it: noun names the resource for a reader ("domains", "active API
// keys"), setting the operator's configuration variable. The body carries resource and limit.
func ResourceLimitReached(resource, noun string, limit int, setting string) *Error {
	return &Error{
		Code:   CodePermissionDenied,
		Reason: ReasonResourceLimit,
		Message: fmt.Sprintf("organization has reached its limit of %d %s; delete one, or ask the platform operator to raise %s",
			limit, noun, setting),
		Fields: map[string]any{"resource": resource, "limit": limit},
	}
}
