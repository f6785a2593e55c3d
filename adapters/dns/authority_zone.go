package dns

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	mdns "github.com/miekg/dns"
	"github.com/postmill/postmill/ports"
)

// maxTXTString is the longest character-string a TXT record holds (RFC 1035 §3.3.14); longer values, such
// as a 2048-bit DKIM key, are served as several strings of one record (RFC 6376 §3.6.2.2).
const maxTXTString = 255

// zonesFor returns the published domains whose name is name or one of its parents, from the cache when a
// read of it is recent enough. A failed read is not kept.
func (a *Authority) zonesFor(name string) ([]ports.PublishedDomain, error) {
	now := time.Now()
	a.mu.Lock()
	r, ok := a.cache[name]
	a.mu.Unlock()
	if ok && now.Before(r.expires) {
		return r.domains, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), authorityStoreTimeout)
	defer cancel()
	domains, err := a.cfg.Domains.PublishedDomains(ctx, candidates(name))
	if err != nil {
		return nil, err
	}
	ttl := a.cfg.CacheTTL
	if len(domains) == 0 {
		ttl = a.cfg.MissTTL
	}
	a.mu.Lock()
	if len(a.cache) >= maxAuthorityCache {
		a.cache = map[string]zoneRead{}
	}
	a.cache[name] = zoneRead{domains: domains, expires: now.Add(ttl)}
	a.mu.Unlock()
	return domains, nil
}

// candidates are name and each of its parents, the names a sending domain that holds name could have:
// "pm1._domainkey.example.com" → itself, "_domainkey.example.com", "example.com", "com".
func candidates(name string) []string {
	out := []string{name}
	for rest := name; ; {
		_, parent, ok := strings.Cut(rest, ".")
		if !ok || parent == "" {
			return out
		}
		out = append(out, parent)
		rest = parent
	}
}

// longestZone returns the most specific published domain that holds name: a sending domain may sit below
// another one (mail.example.com and example.com), and the nearer one answers for its names.
func longestZone(name string, domains []ports.PublishedDomain) (string, bool) {
	best := ""
	for _, d := range domains {
		if (name == d.Name || strings.HasSuffix(name, "."+d.Name)) && len(d.Name) > len(best) {
			best = d.Name
		}
	}
	return best, best != ""
}

// zoneAnswer answers a question about name inside zone, a sending domain of the instance. Every domain of
// that name (one per organization holding it) contributes its records; identical ones are served once.
// A CNAME answers every type at its name (RFC 1034 §3.6.2); the apex answers MX with the domain's own
// exchangers or the mail catcher; a name with nothing of the type is NODATA when it exists (it holds a
// record, or a name below it does: RFC 8020 §2) and NXDOMAIN otherwise, both with the zone's SOA.
func (a *Authority) zoneAnswer(req *mdns.Msg, q mdns.Question, name, zone string, domains []ports.PublishedDomain) *mdns.Msg {
	m := authoritative(req)
	var (
		txts, cnames []string
		mxs          []ports.MX
		exists       = name == zone
	)
	for _, d := range domains {
		if d.Name != zone {
			continue
		}
		if name == zone {
			mxs = append(mxs, d.MX...)
		}
		for _, r := range d.Records {
			host := canonical(r.Host)
			if strings.HasSuffix(host, "."+name) {
				exists = true
			}
			if host != name {
				continue
			}
			exists = true
			switch r.Type {
			case ports.RecordSPF, ports.RecordDKIM, ports.RecordDMARC:
				if !slices.Contains(txts, r.Value) {
					txts = append(txts, r.Value)
				}
			case ports.RecordReturnPath, ports.RecordTracking:
				if target := canonical(r.Value); !slices.Contains(cnames, target) {
					cnames = append(cnames, target)
				}
			}
		}
	}
	switch {
	case len(cnames) > 0:
		// A name holds one alias at most (RFC 2181 §10.1); the first domain's wins.
		m.Answer = []mdns.RR{&mdns.CNAME{Hdr: rrHeader(q.Name, mdns.TypeCNAME), Target: mdns.Fqdn(cnames[0])}}
	case q.Qtype == mdns.TypeTXT:
		for _, v := range txts {
			m.Answer = append(m.Answer, &mdns.TXT{Hdr: rrHeader(q.Name, mdns.TypeTXT), Txt: txtStrings(v)})
		}
	case q.Qtype == mdns.TypeMX && name == zone:
		if len(mxs) == 0 && a.cfg.MailHost != "" {
			mxs = []ports.MX{{Host: a.cfg.MailHost, Preference: 10}}
		}
		for _, mx := range mxs {
			m.Answer = append(m.Answer, &mdns.MX{Hdr: rrHeader(q.Name, mdns.TypeMX), Preference: mx.Preference, Mx: mdns.Fqdn(mx.Host)})
		}
	case q.Qtype == mdns.TypeSOA && name == zone:
		m.Answer = []mdns.RR{soa(zone)}
	}
	if len(m.Answer) == 0 {
		if !exists {
			m.Rcode = mdns.RcodeNameError
		}
		m.Ns = []mdns.RR{soa(zone)}
	}
	return m
}

// txtStrings splits a record's value into character-strings of at most 255 bytes, each in the presentation
// form miekg/dns packs from.
func txtStrings(v string) []string {
	var out []string
	for len(v) > maxTXTString {
		out = append(out, escapeTXT(v[:maxTXTString]))
		v = v[maxTXTString:]
	}
	return append(out, escapeTXT(v))
}

// escapeTXT writes raw bytes in miekg/dns's presentation form of a character-string: '"' and '\' behind a
// backslash, unprintable bytes as \DDD (RFC 1035 §5.1). The resolver's unescape reverses it.
func escapeTXT(raw string) string {
	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < ' ' || c > '~':
			d := strconv.Itoa(int(c))
			b.WriteString(`\` + strings.Repeat("0", 3-len(d)) + d)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
