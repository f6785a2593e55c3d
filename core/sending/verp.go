package sending

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"strings"

	"github.com/google/uuid"
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
	verpPrefix    = "b-"
	verpHost      = "bounce."
	verpPayload   = 1 + 16                  // kind byte and UUID
	verpTokenLen  = (verpPayload*8 + 4) / 5 // base32 characters without padding
	verpMACHexLen = 8                       // 32 bits of HMAC-SHA256, hex
)

// verpEncoding is RFC 4648 §6 base32 without padding; tokens are written in lower case.
var verpEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// EncodeVERP returns the envelope sender (RFC 5321 §4.1.2 Reverse-path) of one delivery:
// b-<token>@bounce.<domain>, where token is lower-case base32 (no padding) of the kind byte and the 16 bytes
// of the UUID id, followed by 8 hex characters of HMAC-SHA256(key, kind|uuid). Bounces come back to that
// address (RFC 3464 §2), and the token maps them to the recipient or message without a lookup table while the
// MAC keeps forged bounces from suppressing arbitrary addresses. The local part is 38 characters, within the
// 64 of RFC 5321 §4.5.3.1.1, and survives receivers that change its case. key is Keyring.Derive("verp").
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
	return verpPrefix + strings.ToLower(verpEncoding.EncodeToString(payload)) + verpMAC(key, payload) +
		"@" + verpHost + strings.ToLower(domain)
}

// DecodeVERP reads the local part of an address made by EncodeVERP (in any letter case; an "@domain" suffix
// is ignored) and returns the kind and the id in canonical UUID form. ok is false for anything else: another
// prefix or length, a token that is not canonical base32, an unknown kind, or a MAC that key did not make.
func DecodeVERP(key []byte, localPart string) (kind byte, id string, ok bool) {
	if at := strings.LastIndexByte(localPart, '@'); at >= 0 {
		localPart = localPart[:at]
	}
	lp := strings.ToLower(localPart)
	if len(lp) != len(verpPrefix)+verpTokenLen+verpMACHexLen || !strings.HasPrefix(lp, verpPrefix) {
		return 0, "", false
	}
	token, mac := lp[len(verpPrefix):len(verpPrefix)+verpTokenLen], lp[len(verpPrefix)+verpTokenLen:]
	payload, err := verpEncoding.DecodeString(strings.ToUpper(token))
	if err != nil || len(payload) != verpPayload || strings.ToLower(verpEncoding.EncodeToString(payload)) != token {
		return 0, "", false
	}
	if !hmac.Equal([]byte(mac), []byte(verpMAC(key, payload))) {
		return 0, "", false
	}
	if payload[0] != VERPRecipient && payload[0] != VERPMessage {
		return 0, "", false
	}
	return payload[0], uuid.UUID(payload[1:]).String(), true
}

// verpMAC is the first 32 bits of HMAC-SHA256 over the payload, in lower-case hex. 32 bits suffice: a forger
// gets one guess per bounce they can make us accept, so 2^32 bounces per forged address.
func verpMAC(key, payload []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(payload)
	return hex.EncodeToString(m.Sum(nil)[:verpMACHexLen/2])
}
