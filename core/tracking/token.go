// Package tracking holds open and click tracking: the sealed tokens that name a recipient of a message, the
// rewriter that puts them into a message's HTML at delivery (a 1x1 pixel and rewritten links), and the use
// case behind the edge's public routes GET /t/o/<token> and GET /t/c/<token> (ports.TrackingService).
//
// # Tokens
//
// A token is the organization, message and recipient ids (and, for a click, the link's position and a digest
// of its URL) sealed with AES-256-GCM under the keyring's at-rest key, bound to this use by the associated
// data "postmill tracking v1", and written in unpadded base64url (RFC 4648 §5). It carries no readable id or
// address, cannot be forged or altered without the master secret, and still opens after the master rotates
// while the old master stays on the keyring.
//
// # Links
//
// A click token does not carry its URL. The redirect target is always the link of the HTML stored with the
// message at send time: the click handler extracts the links from that HTML with the same function the
// rewriter used (Tracker.Links), takes the token's index, and checks the URL's digest. So the edge never
// redirects anywhere the sender's own message did not link to.
package tracking

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/ports"
)

// Token kinds: the first byte of a sealed payload. A token of one kind is refused where the other is
// expected, so a pixel URL cannot be replayed as a click.
const (
	// KindOpen names the open pixel of one recipient's copy.
	KindOpen byte = 'o'
	// KindClick names one link of one recipient's copy.
	KindClick byte = 'c'
)

// MaxTokenLen bounds what Decode (and the edge, before calling the core) accepts. A click token is 123
// characters; anything much longer is not one of ours and is refused before any decoding work.
const MaxTokenLen = 512

// tokenAAD binds sealed tokens to tracking: a value sealed by the same keyring for another purpose (a DKIM
// key, a webhook secret) does not open as a token, nor a token as one of those.
var tokenAAD = []byte("postmill tracking v1")

// Payload layout: kind | organization id | message id | recipient id, then for a click the link index
// (uint16, big endian) and the link's digest (4 bytes).
const (
	idLen         = 16
	openPayload   = 1 + 3*idLen
	clickPayload  = openPayload + 2 + 4
	maxLinkIndex  = 1<<16 - 1
	digestLen     = 4
	defaultScheme = "https"
)

// tokenEncoding is unpadded base64url (RFC 4648 §5): URL- and attribute-safe, and strict, so a token has
// exactly one spelling and a changed character never decodes to the same bytes.
var tokenEncoding = base64.RawURLEncoding.Strict()

// invalidToken is what every malformed, altered, foreign or truncated token yields; it deliberately does not
// say which check failed.
func invalidToken() error { return ports.Errorf(ports.CodeInvalidArgument, "invalid tracking token") }

// Token is what a tracking URL names. Ids are UUIDs in canonical form.
type Token struct {
	Kind           byte
	OrganizationID string
	MessageID      string
	RecipientID    string
	// LinkIndex is the link's position among the message's trackable links (Tracker.Links), from 0.
	// Click tokens only.
	LinkIndex int
	// LinkDigest is LinkDigest(url) of the link at LinkIndex when the message was sent. The click handler
	// checks it against the stored HTML, so a change in how links are extracted (a new Postmill, a new
	// PublicBaseURL) cannot send a recipient to a different link of the message. Click tokens only.
	LinkDigest uint32
}

// LinkDigest is the digest of a link's URL that a click token carries: the first 4 bytes of its SHA-256.
// It only has to tell the links of one message apart; the token's seal is what stops forgery.
func LinkDigest(url string) uint32 {
	sum := sha256.Sum256([]byte(url))
	return binary.BigEndian.Uint32(sum[:digestLen])
}

// Tracker makes and reads tracking tokens and rewrites HTML bodies. It is safe for concurrent use once
// built; set PublicBaseURL before the first use.
type Tracker struct {
	keyring *secret.Keyring
	scheme  string
	// PublicBaseURL is Postmill's public base URL (POSTMILL_BASE_URL). Links under its /p/ routes (the
	// unsubscribe and preference pages) are never tracked. It takes part in deciding which links are
	// trackable, so it must be the same when a message is sent and when its links are clicked; the link
	// digest catches the rare click across a change.
	PublicBaseURL string
}

// NewTracker builds a Tracker over the keyring. scheme is the scheme of tracking URLs
// (POSTMILL_TRACKING_SCHEME): "https" (the default when empty) or "http" for a tracking host without TLS.
func NewTracker(keyring *secret.Keyring, scheme string) (*Tracker, error) {
	if keyring == nil {
		return nil, errors.New("tracking: a keyring is required")
	}
	scheme = strings.ToLower(strings.TrimSpace(scheme))
	switch scheme {
	case "":
		scheme = defaultScheme
	case "http", "https":
	default:
		return nil, fmt.Errorf("tracking: scheme must be http or https, not %q", scheme)
	}
	return &Tracker{keyring: keyring, scheme: scheme}, nil
}

// Encode seals tok into a URL-safe token. It fails when an id is not a UUID, the kind is unknown, or a
// click's LinkIndex does not fit in 16 bits (a message with more than 65535 links).
func (t *Tracker) Encode(tok Token) (string, error) {
	n := openPayload
	switch tok.Kind {
	case KindOpen:
	case KindClick:
		if tok.LinkIndex < 0 || tok.LinkIndex > maxLinkIndex {
			return "", fmt.Errorf("tracking: link index %d out of range", tok.LinkIndex)
		}
		n = clickPayload
	default:
		return "", fmt.Errorf("tracking: unknown token kind %q", tok.Kind)
	}
	p := make([]byte, 1, n)
	p[0] = tok.Kind
	for _, id := range []string{tok.OrganizationID, tok.MessageID, tok.RecipientID} {
		u, err := uuid.Parse(id)
		if err != nil {
			return "", fmt.Errorf("tracking: id %q: %w", id, err)
		}
		p = append(p, u[:]...)
	}
	if tok.Kind == KindClick {
		p = binary.BigEndian.AppendUint16(p, uint16(tok.LinkIndex))
		p = binary.BigEndian.AppendUint32(p, tok.LinkDigest)
	}
	sealed, err := t.keyring.Seal(p, tokenAAD)
	if err != nil {
		return "", fmt.Errorf("tracking: %w", err)
	}
	return tokenEncoding.EncodeToString(sealed), nil
}

// Decode opens a token made by Encode on this keyring (or one whose master is still on it). Anything else
// (too long, not base64url, altered, truncated, sealed by another keyring or for another purpose, an
// unknown kind or a payload of the wrong length for its kind) is invalid_argument.
func (t *Tracker) Decode(s string) (Token, error) {
	if len(s) == 0 || len(s) > MaxTokenLen {
		return Token{}, invalidToken()
	}
	sealed, err := tokenEncoding.DecodeString(s)
	if err != nil {
		return Token{}, invalidToken()
	}
	p, err := t.keyring.Open(sealed, tokenAAD)
	if err != nil || len(p) == 0 {
		return Token{}, invalidToken()
	}
	tok := Token{Kind: p[0]}
	switch {
	case tok.Kind == KindOpen && len(p) == openPayload:
	case tok.Kind == KindClick && len(p) == clickPayload:
		tok.LinkIndex = int(binary.BigEndian.Uint16(p[openPayload:]))
		tok.LinkDigest = binary.BigEndian.Uint32(p[openPayload+2:])
	default:
		return Token{}, invalidToken()
	}
	tok.OrganizationID = uuid.UUID(p[1 : 1+idLen]).String()
	tok.MessageID = uuid.UUID(p[1+idLen : 1+2*idLen]).String()
	tok.RecipientID = uuid.UUID(p[1+2*idLen : 1+3*idLen]).String()
	return tok, nil
}
