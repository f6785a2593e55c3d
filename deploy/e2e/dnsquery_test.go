package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// lookupTXT asks server directly for name's TXT records, chunks joined: the DKIM verifier in these tests
// reads the published key this way rather than through Postmill's own resolver.
func lookupTXT(server, name string) ([]string, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeTXT)
	c := &dns.Client{Net: "tcp"}
	in, _, err := c.Exchange(m, server)
	if err != nil {
		return nil, err
	}
	if in.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("%s: %s", name, dns.RcodeToString[in.Rcode])
	}
	var out []string
	for _, rr := range in.Answer {
		if t, ok := rr.(*dns.TXT); ok {
			out = append(out, strings.Join(t.Txt, ""))
		}
	}
	return out, nil
}

func atoiPort(tb testing.TB, s string) int {
	tb.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}
