package sending

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"strings"

	"github.com/google/uuid"

	"github.com/postmill/postmill/core/secret"
)

// VERP kinds: what the id inside a return path names.
const (
	// VERPRecipient names a recipient id: the job had one recipient, so a bounce to it needs no parsing.
	VERPRecipient byte = 'r'
	// VERPMessage names a message id: the job had several recipients in one SMTP transaction, and the
	// bounce's Final-Recipient field (RFC 3464 §2.3.2) tells which one failed.
	VERPMessage byte = 'm'
)

// VERPKeyPurpose is the Keyring.Derive purpose of the key that authenticates VERP tokens.
const VERPKeyPurpose = "verp"

const (
	verpPrefix     = "b-"
	verpHost       = "bounce."
	verpPayload    = 1 + 16                  // kind byte and UUID
	verpTokenLen   = (verpPayload*8 + 4) / 5 // base32 characters without padding
	verpKeyIDLen   = 2                       // hex characters of secret.KeyID naming the key
	verpMACHexLen  = 8                       // 32 bits of HMAC-SHA256, hex
	verpLocalLen   = len(verpPrefix) + verpTokenLen + verpKeyIDLen + verpMACHexLen
	verpLegacyLen  = verpLocalLen - verpKeyIDLen // return paths made before they named their key
	verpDomainMark = '@'
)

// verpEncoding is RFC 4648 §6 base32 without padding; tokens are written in lower case.
var verpEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// EncodeVERP returns the envelope sender (RFC 5321 §4.1.2 Reverse-path) of one delivery:
// b-<token><key id><mac>@bounce.<domain>, where token is lower-case base32 (no padding) of the kind byte and
// the 16 bytes of the UUID id, key id is the first 2 hex characters of secret.KeyID(key), and mac is 8 hex
// characters of HMAC-SHA256(key, kind|uuid). Bounces come back to that address (RFC 3464 §2), and the token
// maps them to the recipient or message without a lookup table while the MAC keeps forged bounces from
// suppressing arbitrary addresses. The key id lets a bounce that arrives after POSTMILL_SECRET_KEY rotated be
// checked against the key that made its address. The local part is 40 characters, within the 64 of RFC 5321
// §4.5.3.1.1, and survives receivers that change its case. key is Keyring.Derive("verp").
// It returns "" when kind is neither VERPRecipient nor VERPMessage or id is not a UUID.
func EncodeVERP(key []byte, kind byte, id string, domain string) string {
	if kind != VERPRecipient && kind != VERPMessage {
		return ""
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return ""
	}
	payload := make([]byte, 0, verpPayload)
	payload = append(append(payload, kind), u[:]...)
	return verpPrefix + strings.ToLower(verpEncoding.EncodeToString(payload)) + verpKeyID(key) + verpMAC(key, payload) +
		string(verpDomainMark) + verpHost + strings.ToLower(domain)
}

// DecodeVERP reads the local part of an address made by EncodeVERP with key (in any letter case; an
// "@domain" suffix is ignored) and returns the kind and the id in canonical UUID form. ok is false for
// anything else: another prefix or length, a token that is not canonical base32, an unknown kind, or a MAC
// that key did not make.
func DecodeVERP(key []byte, localPart string) (kind byte, id string, ok bool) {
	return DecodeVERPKeys([][]byte{key}, localPart)
}

// DecodeVERPKeys is DecodeVERP for a keyring's worth of keys (Keyring.DeriveAll("verp")): it checks the MAC
// only against the keys whose id the address names, so a rotation does not orphan the bounces of mail sent
// before it and adds no forgery chances. Return paths made before they carried a key id (two characters
// shorter) are checked against every key.
func DecodeVERPKeys(keys [][]byte, localPart string) (kind byte, id string, ok bool) {
	if at := strings.LastIndexByte(localPart, verpDomainMark); at >= 0 {
		localPart = localPart[:at]
	}
	lp := strings.ToLower(localPart)
	if (len(lp) != verpLocalLen && len(lp) != verpLegacyLen) || !strings.HasPrefix(lp, verpPrefix) {
		return 0, "", false
	}
	rest := lp[len(verpPrefix):]
	token, mac := rest[:verpTokenLen], rest[len(rest)-verpMACHexLen:]
	keyID, named := rest[verpTokenLen:len(rest)-verpMACHexLen], len(lp) == verpLocalLen
	payload, err := verpEncoding.DecodeString(strings.ToUpper(token))
	if err != nil || len(payload) != verpPayload || strings.ToLower(verpEncoding.EncodeToString(payload)) != token {
		return 0, "", false
	}
	matched := false
	for _, key := range keys {
		if named && keyID != verpKeyID(key) {
			continue
		}
		if hmac.Equal([]byte(mac), []byte(verpMAC(key, payload))) {
			matched = true
			break
		}
	}
	if !matched {
		return 0, "", false
	}
	if payload[0] != VERPRecipient && payload[0] != VERPMessage {
		return 0, "", false
	}
	return payload[0], uuid.UUID(payload[1:]).String(), true
}

// verpKeyID is the short key id a return path carries: enough to pick the key among the two or three on a
// keyring during a rotation, too short to say anything about the key.
func verpKeyID(key []byte) string {
	return secret.KeyID(key)[:verpKeyIDLen]
}

// verpMAC is the first 32 bits of HMAC-SHA256 over the payload, in lower-case hex. 32 bits suffice: a forger
// gets one guess per bounce they can make us accept, so 2^32 bounces per forged address.
func verpMAC(key, payload []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(payload)
	return hex.EncodeToString(m.Sum(nil)[:verpMACHexLen/2])
}
