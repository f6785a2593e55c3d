package tlspolicy

import (
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/postmill/postmill/ports"
)

// TLSA usages, selectors and matching types SMTP uses (RFC 7672 §3.1, RFC 7218 names).
const (
	usageDANETA = 2
	usageDANEEE = 3

	selectorCert = 0
	selectorSPKI = 1

	matchFull   = 0
	matchSHA256 = 1
	matchSHA512 = 2
)

// usableTLSA returns the records an SMTP client may use (RFC 7672 §3.1): DANE-TA(2) and DANE-EE(3) with a
// known selector and matching type and data of the right length. PKIX-TA(0) and PKIX-EE(1) are unusable
// for SMTP (§3.1.3), as is anything unknown.
func usableTLSA(records []ports.TLSA) []ports.TLSA {
	var out []ports.TLSA
	for _, r := range records {
		if r.Usage != usageDANETA && r.Usage != usageDANEEE {
			continue
		}
		if r.Selector != selectorCert && r.Selector != selectorSPKI {
			continue
		}
		switch {
		case r.MatchingType == matchFull && len(r.Data) > 0,
			r.MatchingType == matchSHA256 && len(r.Data) == sha256.Size,
			r.MatchingType == matchSHA512 && len(r.Data) == sha512.Size:
			out = append(out, r)
		}
	}
	return out
}

// tlsaMatches reports whether cert is the one r names.
func tlsaMatches(r ports.TLSA, cert *x509.Certificate) bool {
	var b []byte
	switch r.Selector {
	case selectorCert:
		b = cert.Raw
	case selectorSPKI:
		b = cert.RawSubjectPublicKeyInfo
	default:
		return false
	}
	switch r.MatchingType {
	case matchFull:
		return bytes.Equal(b, r.Data)
	case matchSHA256:
		sum := sha256.Sum256(b)
		return bytes.Equal(sum[:], r.Data)
	case matchSHA512:
		sum := sha512.Sum512(b)
		return bytes.Equal(sum[:], r.Data)
	}
	return false
}

// verifyDANE checks a server's chain against usable TLSA records (RFC 7672 §3.1, RFC 7671 §5). DANE-EE(3):
// the leaf certificate or its key is the one published, and nothing else about it is checked, neither
// names nor dates (§3.1.1). DANE-TA(2): a certificate the server sent is the published trust anchor, and
// the leaf chains to it, is within its dates and names host (§3.1.2, §3.2.2). The Web PKI plays no part.
func verifyDANE(cs tls.ConnectionState, host string, records []ports.TLSA, now time.Time) *Failure {
	certs := cs.PeerCertificates
	if len(certs) == 0 {
		return &Failure{Result: ResultTLSAInvalid, Reason: "the server sent no certificate"}
	}
	var taFailure *Failure
	for _, r := range records {
		switch r.Usage {
		case usageDANEEE:
			if tlsaMatches(r, certs[0]) {
				return nil
			}
		case usageDANETA:
			for i, ta := range certs {
				if !tlsaMatches(r, ta) {
					continue
				}
				roots := x509.NewCertPool()
				roots.AddCert(ta)
				inter := x509.NewCertPool()
				for _, c := range certs[1:] {
					inter.AddCert(c)
				}
				if i == 0 {
					// The leaf itself as the trust anchor: it must still name the host.
					if err := certs[0].VerifyHostname(host); err != nil {
						taFailure = classify(err)
						continue
					}
					return nil
				}
				_, err := certs[0].Verify(x509.VerifyOptions{DNSName: host, Roots: roots, Intermediates: inter,
					CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
				if err == nil {
					return nil
				}
				taFailure = classify(err)
			}
		}
	}
	if taFailure != nil {
		return taFailure
	}
	return &Failure{Result: ResultTLSAInvalid, Reason: "no TLSA record matches the certificate chain"}
}

// verifyWebPKI checks a server's chain as MTA-STS requires (RFC 8461 §4.2): it chains to a trusted root
// (roots; nil means the system's), is within its dates, and names host (RFC 6125, one-label wildcards).
func verifyWebPKI(cs tls.ConnectionState, host string, roots *x509.CertPool, now time.Time) *Failure {
	certs := cs.PeerCertificates
	if len(certs) == 0 {
		return &Failure{Result: ResultValidationFailure, Reason: "the server sent no certificate"}
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{DNSName: host, Roots: roots, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		return classify(err)
	}
	return nil
}

// classify names a certificate verification error with its RFC 8460 §4.3.2 result type.
func classify(err error) *Failure {
	var he x509.HostnameError
	var ie x509.CertificateInvalidError
	var ue x509.UnknownAuthorityError
	switch {
	case errors.As(err, &he):
		return &Failure{Result: ResultCertificateHostMismatch, Reason: err.Error()}
	case errors.As(err, &ie) && ie.Reason == x509.Expired:
		return &Failure{Result: ResultCertificateExpired, Reason: err.Error()}
	case errors.As(err, &ue):
		return &Failure{Result: ResultCertificateNotTrusted, Reason: err.Error()}
	}
	return &Failure{Result: ResultValidationFailure, Reason: err.Error()}
}

// Failure is a transport security check that did not pass, named with its RFC 8460 §4.3 result type; it
// is the error Host.Verify returns, and what TLS-RPT counts.
type Failure struct {
	Result string // e.g. certificate-host-mismatch, tlsa-invalid, starttls-not-supported
	Reason string // the detail, for the delivery's outcome and the report's failure-reason-code
}

// Fail returns a Failure of result with a reason, for checks the MTA makes itself (a server without
// STARTTLS).
func Fail(result, reason string) *Failure { return &Failure{Result: result, Reason: reason} }

func (f *Failure) Error() string { return fmt.Sprintf("%s: %s", f.Result, f.Reason) }
