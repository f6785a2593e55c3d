// Package secret turns Postmill's master secret (POSTMILL_SECRET_KEY) into the keys the core needs: purpose-bound
// keys derived with HKDF (RFC 5869) for signing, and AES-256-GCM encryption at rest for TOTP seeds, DKIM private
// keys and webhook secrets. Sealed values carry the id of the key that sealed them, so the master secret can
// rotate: a new master becomes primary and old ones stay on the keyring only to open what they sealed.
package secret

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// MinMasterLen is the shortest master secret a Keyring accepts. HKDF cannot add entropy that the master lacks,
// so a short master would make every derived key guessable.
const MinMasterLen = 16

// Layout of a sealed value: version | key id | nonce | ciphertext and GCM tag.
const (
	sealVersion   byte = 1
	keyIDLen           = 8
	nonceLen           = 12
	headerLen          = 1 + keyIDLen + nonceLen
	atRestPurpose      = "at-rest"
	derivedKeyLen      = 32
)

// ErrOpen is returned by Open for any sealed value it cannot authenticate. It deliberately does not say
// whether the key id, the version, the ciphertext or the associated data was wrong.
var ErrOpen = errors.New("secret: cannot open sealed value")

// Keyring holds the master secrets and the encryption keys derived from them. The first master is the primary:
// Derive and Seal use it. Later masters only open values sealed before a rotation.
type Keyring struct {
	masters [][]byte     // primary first
	sealing sealingKey   // derived from the primary
	opening []sealingKey // one per master, primary first
}

type sealingKey struct {
	id   [keyIDLen]byte
	aead cipher.AEAD
}

// NewKeyring builds a keyring from master secrets, primary first. Passing the previous master after the new one
// keeps values sealed under it readable while they are re-sealed.
func NewKeyring(masters ...[]byte) (*Keyring, error) {
	if len(masters) == 0 {
		return nil, errors.New("secret: at least one master secret is required")
	}
	k := &Keyring{}
	for i, m := range masters {
		if len(m) < MinMasterLen {
			return nil, fmt.Errorf("secret: master secret %d is %d bytes; at least %d are required", i, len(m), MinMasterLen)
		}
		k.masters = append(k.masters, bytes.Clone(m))
		sk, err := newSealingKey(m)
		if err != nil {
			return nil, err
		}
		k.opening = append(k.opening, sk)
	}
	k.sealing = k.opening[0]
	return k, nil
}

func newSealingKey(master []byte) (sealingKey, error) {
	key := derive(master, atRestPurpose)
	block, err := aes.NewCipher(key)
	if err != nil {
		return sealingKey{}, fmt.Errorf("secret: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return sealingKey{}, fmt.Errorf("secret: %w", err)
	}
	// The id is a hash of the key under a label of its own: it names the key without revealing it, so it can
	// sit in the clear in every sealed value.
	sum := sha256.Sum256(append([]byte("postmill key id\x00"), key...))
	sk := sealingKey{aead: aead}
	copy(sk.id[:], sum[:keyIDLen])
	return sk, nil
}

// derive is HKDF-SHA256 (RFC 5869) with the purpose as the info string, which binds each derived key to one use
// so that a key leaked from one purpose says nothing about another.
func derive(master []byte, purpose string) []byte {
	key, err := hkdf.Key(sha256.New, master, nil, purpose, derivedKeyLen)
	if err != nil {
		// Only an output longer than 255 hash blocks fails, and 32 bytes is one block.
		panic("secret: hkdf: " + err.Error())
	}
	return key
}

// Derive returns a 32-byte key for purpose (such as "jwt-access") from the primary master. Distinct purposes
// give independent keys, so one master secret can serve every signing and MAC need. The key changes when the
// primary rotates: whatever checks a value made with it should check against DeriveAll instead, so values
// made before a rotation keep verifying while the old master stays on the keyring.
func (k *Keyring) Derive(purpose string) []byte {
	return derive(k.masters[0], purpose)
}

// DeriveAll returns the purpose key of every master, the primary's first. Makers use the first; checkers try
// each, preferably only those whose KeyID the checked value names.
func (k *Keyring) DeriveAll(purpose string) [][]byte {
	keys := make([][]byte, len(k.masters))
	for i, m := range k.masters {
		keys[i] = derive(m, purpose)
	}
	return keys
}

// KeyID names a derived key in 8 lower-case hex characters (32 bits of a hash of the key under a label of its
// own), so a signed value can say which key made it without revealing anything about the key. It is a hint
// for picking the key to verify with, never proof: two keys may share an id, and checkers must still verify.
func KeyID(key []byte) string {
	sum := sha256.Sum256(append([]byte("postmill derived key id\x00"), key...))
	return hex.EncodeToString(sum[:4])
}

// Seal encrypts plaintext with AES-256-GCM under the primary's at-rest key. aad is authenticated but not
// stored: bind the value to its owner (a user id, a domain id) so a sealed value copied to another row does
// not open there. The output is version | key id | random 96-bit nonce | ciphertext+tag; random nonces are
// safe for the volumes involved (NIST SP 800-38D §8.3 allows 2^32 messages per key).
func (k *Keyring) Seal(plaintext, aad []byte) ([]byte, error) {
	out := make([]byte, headerLen, headerLen+len(plaintext)+k.sealing.aead.Overhead())
	out[0] = sealVersion
	copy(out[1:], k.sealing.id[:])
	if _, err := rand.Read(out[1+keyIDLen : headerLen]); err != nil {
		return nil, fmt.Errorf("secret: nonce: %w", err)
	}
	return k.sealing.aead.Seal(out, out[1+keyIDLen:headerLen], plaintext, additionalData(out[:1+keyIDLen], aad)), nil
}

// Open decrypts a value made by Seal on this keyring or on one whose master is still on it. It fails with
// ErrOpen when the key id is unknown, the value was altered, or aad differs from the one given to Seal.
func (k *Keyring) Open(sealed, aad []byte) ([]byte, error) {
	if len(sealed) < headerLen+k.sealing.aead.Overhead() || sealed[0] != sealVersion {
		return nil, ErrOpen
	}
	id := sealed[1 : 1+keyIDLen]
	for _, sk := range k.opening {
		if !bytes.Equal(sk.id[:], id) {
			continue
		}
		plain, err := sk.aead.Open(nil, sealed[1+keyIDLen:headerLen], sealed[headerLen:], additionalData(sealed[:1+keyIDLen], aad))
		if err != nil {
			return nil, ErrOpen
		}
		return plain, nil
	}
	return nil, ErrOpen
}

// SealedByPrimary reports whether sealed names the primary's key id, that is whether re-sealing it would
// change nothing. It does not authenticate the value; Open does.
func (k *Keyring) SealedByPrimary(sealed []byte) bool {
	return len(sealed) >= headerLen && sealed[0] == sealVersion && bytes.Equal(sealed[1:1+keyIDLen], k.sealing.id[:])
}

// Reseal opens a value sealed under any master on the keyring and seals it again under the primary with the
// same aad. A value already sealed by the primary comes back unchanged with changed false, so running it over
// every stored value twice does no more work the second time. Errors: ErrOpen when the value does not open.
func (k *Keyring) Reseal(sealed, aad []byte) (out []byte, changed bool, err error) {
	if k.SealedByPrimary(sealed) {
		if _, err := k.Open(sealed, aad); err != nil {
			return nil, false, err
		}
		return sealed, false, nil
	}
	plain, err := k.Open(sealed, aad)
	if err != nil {
		return nil, false, err
	}
	out, err = k.Seal(plain, aad)
	if err != nil {
		return nil, false, err
	}
	return out, true, nil
}

// additionalData authenticates the header (version and key id) together with the caller's aad, so neither can
// be swapped without GCM noticing. The header has a fixed length, so the concatenation is unambiguous.
func additionalData(header, aad []byte) []byte {
	ad := make([]byte, 0, len(header)+len(aad))
	ad = append(ad, header...)
	return append(ad, aad...)
}
