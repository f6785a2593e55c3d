package catcher

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"strings"

	"github.com/emersion/go-message/textproto"
	"github.com/emersion/go-msgauth/dkim"

	"github.com/postmill/postmill/ports"
)

// verify checks the message's first DKIM signature (RFC 6376 §6) with the key its selector publishes,
// looked up through the platform's resolver: in local mode the in-process DNS server, which serves the key
// core/domain generated. So "pass" means the MTA signed with the key the domain's records publish, and a
// wrong key, a changed header or body, or an unpublished selector each show as a failure with its reason.
func (c *Catcher) verify(ctx context.Context, raw []byte) ports.DKIMResult {
	domain, selector, signed := firstSignature(raw)
	if !signed {
		return ports.DKIMResult{Result: ports.DKIMNone, Reason: "no DKIM-Signature header"}
	}
	res := ports.DKIMResult{Domain: domain, Selector: selector}
	if c.resolver == nil {
		res.Result, res.Reason = ports.DKIMTempError, "no resolver to look the key up with"
		return res
	}
	lookup := func(name string) ([]string, error) {
		ctx, cancel := context.WithTimeout(ctx, dkimTimeout)
		defer cancel()
		txt, err := c.resolver.LookupTXT(ctx, name)
		if de, ok := errors.AsType[*ports.DNSError](err); ok && de.Kind == ports.DNSTemporary {
			return nil, temporary{err}
		}
		return txt, err
	}
	vs, err := dkim.VerifyWithOptions(bytes.NewReader(raw), &dkim.VerifyOptions{LookupTXT: lookup, MaxVerifications: 1})
	switch {
	case len(vs) == 0 && err != nil:
		res.Result, res.Reason = ports.DKIMPermError, bounded(err.Error(), maxFieldBytes)
	case len(vs) == 0:
		res.Result, res.Reason = ports.DKIMNone, "no DKIM-Signature header"
	case vs[0].Err == nil:
		res.Result, res.Domain = ports.DKIMPass, vs[0].Domain
	case dkim.IsTempFail(vs[0].Err):
		res.Result, res.Reason = ports.DKIMTempError, bounded(vs[0].Err.Error(), maxFieldBytes)
	case dkim.IsPermFail(vs[0].Err):
		res.Result, res.Reason = ports.DKIMPermError, bounded(vs[0].Err.Error(), maxFieldBytes)
	default:
		res.Result, res.Reason = ports.DKIMFail, bounded(vs[0].Err.Error(), maxFieldBytes)
	}
	return res
}

// firstSignature returns d= and s= of the first DKIM-Signature field, the one verify checks (go-msgauth
// verifies signatures in header order).
func firstSignature(raw []byte) (domain, selector string, ok bool) {
	h, err := textproto.ReadHeader(bufio.NewReader(bytes.NewReader(raw)))
	if err != nil {
		return "", "", false
	}
	v := h.Get("DKIM-Signature")
	if v == "" {
		return "", "", false
	}
	for _, tag := range strings.Split(v, ";") {
		k, val, _ := strings.Cut(tag, "=")
		val = strings.Join(strings.Fields(val), "")
		switch strings.TrimSpace(k) {
		case "d":
			domain = bounded(val, maxFieldBytes)
		case "s":
			selector = bounded(val, maxFieldBytes)
		}
	}
	return domain, selector, true
}

// temporary marks a lookup failure that may pass, the way go-msgauth recognises one: a net.Error whose
// Temporary is true (it then reports a temperror rather than a permerror, RFC 6376 §6.1.2).
type temporary struct{ error }

func (temporary) Timeout() bool   { return false }
func (temporary) Temporary() bool { return true }
