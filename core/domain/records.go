package domain

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/postmill/postmill/core/secret"
	"github.com/postmill/postmill/ports"
)

// selectorPrefix starts every DKIM selector so that Postmill's keys are recognisable in a zone.
const selectorPrefix = "pm"

// selectorRandomLen is the number of random base32 characters after the prefix: 50 bits, so two domains of
// one organization never share a selector in practice and a selector reveals nothing about its domain.
const selectorRandomLen = 10

// newSelector returns pm followed by ten lower-case base32 characters (a-z, 2-7), a valid DNS label
// (RFC 6376 §3.1: selectors are sub-domain names).
func newSelector() string {
	return selectorPrefix + strings.ToLower(rand.Text()[:selectorRandomLen])
}

// newDKIMKey generates an RSA keypair for DKIM (RFC 6376 §3.3.1, rsa-sha256). It returns the private key as
// PKCS#8 DER, the form the store seals, and the public key as the base64 of its DER SubjectPublicKeyInfo,
// which is what the p= tag of the key record carries (RFC 6376 §3.6.1).
func newDKIMKey(bits int) (privateDER []byte, publicKey string, err error) {
	key, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		return nil, "", err
	}
	privateDER, err = x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, "", err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, "", err
	}
	return privateDER, base64.StdEncoding.EncodeToString(pub), nil
}

// sealKey encrypts the PKCS#8 DER of a DKIM key with the domain id as associated data, so a sealed key copied
// onto another domain's row does not open there.
func sealKey(k *secret.Keyring, der []byte, domainID string) ([]byte, error) {
	return k.Seal(der, []byte(domainID))
}

// OpenKey opens a domain's sealed DKIM private key (PKCS#8 DER). It is the one place, with sealKey, that
// knows the key is bound to its domain id; the delivery path calls it right before signing, so the key
// exists in the clear only while a message is prepared.
func OpenKey(k *secret.Keyring, d ports.Domain) ([]byte, error) {
	der, err := k.Open(d.DKIMPrivateKey, []byte(d.ID))
	if err != nil {
		return nil, fmt.Errorf("domain: open dkim key of %s: %w", d.ID, err)
	}
	return der, nil
}

// Hosts and values of the records a domain publishes (SPEC §2).
func spfValue(include string) string { return "v=spf1 include:" + include + " ~all" }

// dkimValue is the key record of RFC 6376 §3.6.1. Its length (about 410 characters for a 2048-bit key) is
// more than one 255-byte TXT character-string holds; DNS hosts split it and verifiers join the strings again
// (RFC 6376 §3.6.2.2).
func dkimValue(publicKey string) string { return "v=DKIM1; k=rsa; p=" + publicKey }

func dkimHost(selector, name string) string { return selector + "._domainkey." + name }

func dmarcValue(rua string) string { return "v=DMARC1; p=quarantine; rua=mailto:" + rua + "; fo=1" }

// recordType is the DNS type a record is published as (SPEC §2's RR column): TXT for SPF, DKIM and DMARC,
// CNAME for RETURN_PATH and TRACKING; empty for a type Postmill does not generate.
func recordType(typ string) string {
	switch typ {
	case ports.RecordSPF, ports.RecordDKIM, ports.RecordDMARC:
		return ports.RRTypeTXT
	case ports.RecordReturnPath, ports.RecordTracking:
		return ports.RRTypeCNAME
	}
	return ""
}

// withRecordTypes fills in every record's RecordType, which is derived from its Type rather than stored, so
// that records read back from the store say how to publish them as well as fresh ones do.
func withRecordTypes(records []ports.DNSRecord) []ports.DNSRecord {
	for i := range records {
		records[i].RecordType = recordType(records[i].Type)
	}
	return records
}

// buildRecords returns the five records of SPEC §2 in the spec's order. SPF, DKIM and RETURN_PATH are
// required (see the package comment); DMARC and TRACKING are recommended.
func buildRecords(cfg Config, domainID, name, selector, publicKey string, newID func() string) []ports.DNSRecord {
	rec := func(typ, host, value string, required bool) ports.DNSRecord {
		return ports.DNSRecord{
			ID:         newID(),
			DomainID:   domainID,
			Type:       typ,
			RecordType: recordType(typ),
			Host:       host,
			Value:      value,
			TTL:        RecordTTL,
			Required:   required,
		}
	}
	return []ports.DNSRecord{
		rec(ports.RecordSPF, name, spfValue(cfg.SPFInclude), true),
		rec(ports.RecordDKIM, dkimHost(selector, name), dkimValue(publicKey), true),
		rec(ports.RecordDMARC, "_dmarc."+name, dmarcValue(cfg.DMARCRua), false),
		rec(ports.RecordReturnPath, "bounce."+name, cfg.ReturnPathHost, true),
		rec(ports.RecordTracking, "track."+name, cfg.TrackingHost, false),
	}
}
