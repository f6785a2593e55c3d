package tlspolicy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/postmill/postmill/ports/netguard"
)

// maxPolicyBytes is the largest policy body read: RFC 8461 §3.3 lets senders refuse anything over 64 KiB.
const maxPolicyBytes = 64 << 10

// maxPolicyHeaderBytes bounds the response headers of a policy host.
const maxPolicyHeaderBytes = 16 << 10

// wellKnownPath is where a policy is published (RFC 8461 §3.3).
const wellKnownPath = "/.well-known/mta-sts.txt"

// fetchError is a failed policy fetch with its RFC 8460 §4.3.4 result type: sts-policy-fetch-error,
// sts-webpki-invalid (the policy host's certificate) or sts-policy-invalid (the body).
type fetchError struct {
	result string
	err    error
}

func (e *fetchError) Error() string { return e.result + ": " + e.err.Error() }

// fetchPolicy fetches and parses https://mta-sts.<domain>/.well-known/mta-sts.txt (RFC 8461 §3.3): the
// host's addresses come from the resolver and pass the forbidden-address rule (ports/netguard, AllowNets
// exempting) as webhook receivers do, and the connection goes to a checked address itself, so a second
// lookup cannot answer differently; the certificate must be valid for the host under the Web PKI; only 200
// is accepted (redirects are never followed); the body is read up to 64 KiB; the whole fetch is bounded by
// FetchTimeout.
func (e *Engine) fetchPolicy(ctx context.Context, domain string) (*stsPolicy, *fetchError) {
	host := "mta-sts." + domain
	ctx, cancel := context.WithTimeout(ctx, e.cfg.FetchTimeout)
	defer cancel()
	fail := func(result string, format string, args ...any) (*stsPolicy, *fetchError) {
		return nil, &fetchError{result: result, err: fmt.Errorf(format, args...)}
	}
	addrs, err := e.resolver.LookupIP(ctx, host)
	if err != nil {
		return fail(ResultSTSPolicyFetchError, "address lookup of %s: %v", host, err)
	}
	var allowed []netip.Addr
	refused := ""
	for _, a := range addrs {
		if why, bad := netguard.Forbidden(a, e.cfg.AllowNets); bad {
			refused = fmt.Sprintf("%s is %s", a, why)
			continue
		}
		allowed = append(allowed, a.Unmap().WithZone(""))
	}
	if len(allowed) == 0 {
		return fail(ResultSTSPolicyFetchError, "%s has no permitted address (%s)", host, refused)
	}

	dialer := &net.Dialer{Timeout: e.cfg.FetchTimeout}
	transport := &http.Transport{
		Proxy: nil, // a proxy would connect to the name on our behalf, past the address check
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var last error
			for _, a := range allowed {
				c, err := dialer.DialContext(ctx, "tcp", netip.AddrPortFrom(a, uint16(e.cfg.HTTPSPort)).String())
				if err == nil {
					return c, nil
				}
				last = err
			}
			return nil, last
		},
		TLSClientConfig:        &tls.Config{ServerName: host, RootCAs: e.cfg.RootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    e.cfg.FetchTimeout,
		ResponseHeaderTimeout:  e.cfg.FetchTimeout,
		MaxResponseHeaderBytes: maxPolicyHeaderBytes,
		DisableKeepAlives:      true,
	}
	defer transport.CloseIdleConnections()
	client := &http.Client{
		Transport:     transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	authority := host
	if e.cfg.HTTPSPort != 443 {
		authority = net.JoinHostPort(host, strconv.Itoa(e.cfg.HTTPSPort))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+authority+wellKnownPath, nil)
	if err != nil {
		return fail(ResultSTSPolicyFetchError, "%v", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		var ve *tls.CertificateVerificationError
		var he x509.HostnameError
		if errors.As(err, &ve) || errors.As(err, &he) {
			return fail(ResultSTSWebPKIInvalid, "certificate of %s: %v", host, err)
		}
		return fail(ResultSTSPolicyFetchError, "fetching the policy from %s: %v", host, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		// RFC 8461 §3.3: only 200 counts, and a redirect is not followed.
		return fail(ResultSTSPolicyFetchError, "%s answered %d", host, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPolicyBytes+1))
	if err != nil {
		return fail(ResultSTSPolicyFetchError, "reading the policy from %s: %v", host, err)
	}
	if len(body) > maxPolicyBytes {
		return fail(ResultSTSPolicyInvalid, "the policy of %s is larger than %d bytes", host, maxPolicyBytes)
	}
	p, err := parseSTSPolicy(string(body))
	if err != nil {
		return fail(ResultSTSPolicyInvalid, "the policy of %s: %v", host, err)
	}
	return p, nil
}

// fetchTimeoutDefault bounds one policy fetch, lookup to last byte. RFC 8461 §3.3 suggests senders give up
// well within a minute; the fetch runs while a delivery waits, so it is shorter.
const fetchTimeoutDefault = 15 * time.Second
