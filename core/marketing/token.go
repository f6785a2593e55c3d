package marketing

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/ports"
)

// Purposes of public tokens. A token sealed for one purpose does not open for another, so a confirm link
// cannot be replayed as an unsubscribe.
const (
	PurposeUnsubscribe = "unsubscribe"
	PurposeConfirm     = "confirm"
	PurposePrefs       = "prefs"
)

// MaxPublicTokenLen bounds what OpenPublicToken (and the edge, before calling the core) accepts; a token
// is 155 characters.
const MaxPublicTokenLen = 256

// PublicToken is what a /p/* link names. Ids are canonical UUIDs; TopicID and BroadcastID may be "".
type PublicToken struct {
	OrganizationID string
	ContactID      string
	TopicID        string
	BroadcastID    string
	IssuedAt       time.Time
}

// Payload layout: version | flags | organization id | contact id | topic id | broadcast id | issued-at
// (Unix seconds, int64 big endian). An absent topic or broadcast is 16 zero bytes with its flag unset.
const (
	tokenVersion  byte = 1
	flagTopic     byte = 1
	flagBroadcast byte = 2
	tokenIDLen         = 16
	tokenPayload       = 2 + 4*tokenIDLen + 8
)

var publicTokenEncoding = base64.RawURLEncoding.Strict()

// publicTokenAAD binds a sealed token to its purpose (and to marketing): a value the keyring sealed for
// anything else does not open as one.
func publicTokenAAD(purpose string) ([]byte, error) {
	switch purpose {
	case PurposeUnsubscribe, PurposeConfirm, PurposePrefs:
		return []byte("postmill public token v1 " + purpose), nil
	}
	return nil, fmt.Errorf("marketing: unknown token purpose %q", purpose)
}

// errInvalidToken is what every bad, altered, truncated or foreign token yields; it does not say which
// check failed.
func errInvalidToken() error { return ports.Errorf(ports.CodeInvalidArgument, "invalid token") }

// SealPublicToken seals t for purpose with the keyring (AES-256-GCM under the at-rest key, which also
// authenticates it) and writes it in unpadded base64url. The token carries no readable id or address.
func SealPublicToken(k *secret.Keyring, purpose string, t PublicToken) (string, error) {
	aad, err := publicTokenAAD(purpose)
	if err != nil {
		return "", err
	}
	p := make([]byte, 2, tokenPayload)
	p[0] = tokenVersion
	ids := []string{t.OrganizationID, t.ContactID, t.TopicID, t.BroadcastID}
	for i, id := range ids {
		var u uuid.UUID
		if id != "" || i < 2 {
			if u, err = uuid.Parse(id); err != nil {
				return "", fmt.Errorf("marketing: token id %q: %w", id, err)
			}
			if i == 2 {
				p[1] |= flagTopic
			}
			if i == 3 {
				p[1] |= flagBroadcast
			}
		}
		p = append(p, u[:]...)
	}
	p = binary.BigEndian.AppendUint64(p, uint64(t.IssuedAt.Unix()))
	sealed, err := k.Seal(p, aad)
	if err != nil {
		return "", fmt.Errorf("marketing: %w", err)
	}
	return publicTokenEncoding.EncodeToString(sealed), nil
}

// OpenPublicToken opens a token SealPublicToken made for purpose on this keyring (or one whose master is
// still on it). Anything else is invalid_argument "invalid token".
func OpenPublicToken(k *secret.Keyring, purpose, token string) (PublicToken, error) {
	aad, err := publicTokenAAD(purpose)
	if err != nil {
		return PublicToken{}, errInvalidToken()
	}
	if len(token) == 0 || len(token) > MaxPublicTokenLen {
		return PublicToken{}, errInvalidToken()
	}
	sealed, err := publicTokenEncoding.DecodeString(token)
	if err != nil {
		return PublicToken{}, errInvalidToken()
	}
	p, err := k.Open(sealed, aad)
	if err != nil || len(p) != tokenPayload || p[0] != tokenVersion || p[1]&^(flagTopic|flagBroadcast) != 0 {
		return PublicToken{}, errInvalidToken()
	}
	id := func(i int) string { return uuid.UUID(p[2+i*tokenIDLen : 2+(i+1)*tokenIDLen]).String() }
	t := PublicToken{OrganizationID: id(0), ContactID: id(1)}
	if p[1]&flagTopic != 0 {
		t.TopicID = id(2)
	}
	if p[1]&flagBroadcast != 0 {
		t.BroadcastID = id(3)
	}
	t.IssuedAt = time.Unix(int64(binary.BigEndian.Uint64(p[2+4*tokenIDLen:])), 0).UTC()
	return t, nil
}
