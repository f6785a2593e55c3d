package domain

import (
	"context"
	"strings"
	"testing"

	"github.com/postmill/postmill/ports"
)

// TestCheckRecordWording: a record that does not verify says what DNS returned and what to change, in terms
// of the rule it breaks; a record that verifies has no problem.
func TestCheckRecordWording(t *testing.T) {
	t.Parallel()
	const (
		host = "acme.example"
		spf  = "v=spf1 include:spf.postmill.test ~all"
		dkim = "v=DKIM1; k=rsa; p=MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAxyz"
	)
	tests := []struct {
		name      string
		check     recordCheck
		ok        bool
		found     []string
		wantParts []string // each must appear in the problem; none means no problem
	}{
		{"SPF exact", checkSPF(host, []string{spf}, spf), true, []string{spf}, nil},
		{"SPF missing among other TXT", checkSPF(host, []string{"google-site-verification=x"}, spf), false,
			[]string{"google-site-verification=x"}, []string{"no SPF record", host, `"` + spf + `"`}},
		{"SPF without our include", checkSPF(host, []string{"v=spf1 include:_spf.google.com ~all"}, spf), false,
			[]string{"v=spf1 include:_spf.google.com ~all"}, []string{"does not authorise", "add include:spf.postmill.test"}},
		{"two SPF records", checkSPF(host, []string{spf, "v=spf1 mx -all"}, spf), false,
			[]string{spf, "v=spf1 mx -all"}, []string{"2 SPF records", "RFC 7208 §3.2", "merge them", "include:spf.postmill.test"}},
		{"DKIM exact", checkTXT(ports.RecordDKIM, "pm1._domainkey."+host, []string{dkim}, dkim), true, []string{dkim}, nil},
		{"DKIM truncated at 255", checkTXT(ports.RecordDKIM, "pm1._domainkey."+host, []string{dkim[:40]}, dkim), false,
			[]string{dkim[:40]}, []string{"cut short after 40 of 65 characters", "split it into several"}},
		{"DKIM with a wrong character", checkTXT(ports.RecordDKIM, "pm1._domainkey."+host, []string{strings.Replace(dkim, "MIIB", "MIIC", 1)}, dkim), false,
			nil, []string{"differs from the expected value at character 22", `found "CIjA`, `expected "BIjA`}},
		{"DKIM with extra text", checkTXT(ports.RecordDKIM, "pm1._domainkey."+host, []string{dkim + " t=y"}, dkim), false,
			nil, []string{"extra text", `" t=y"`}},
		{"DMARC absent, other TXT present", checkTXT(ports.RecordDMARC, "_dmarc."+host, []string{"something else"}, "v=DMARC1; p=quarantine"), false,
			[]string{"something else"}, []string{"no DMARC record (v=DMARC1; ...)", "_dmarc." + host}},
		{"CNAME right, trailing dot and case", checkCNAME("bounce."+host, "Bounces.Postmill.Test.", "bounces.postmill.test"), true,
			[]string{"Bounces.Postmill.Test."}, nil},
		{"CNAME elsewhere", checkCNAME("bounce."+host, "bounces.other.test", "bounces.postmill.test"), false,
			[]string{"bounces.other.test"}, []string{`points to "bounces.other.test"`, "point it to bounces.postmill.test"}},
		{"NXDOMAIN", lookupFailed(ports.RRTypeTXT, host, &ports.DNSError{Kind: ports.DNSNotFound, Name: host}), false,
			nil, []string{"no TXT record at " + host, "NXDOMAIN"}},
		{"NODATA on a CNAME", lookupFailed(ports.RRTypeCNAME, "track."+host, &ports.DNSError{Kind: ports.DNSNoData}), false,
			nil, []string{"no CNAME record at track." + host, "flattens"}},
		{"SERVFAIL", lookupFailed(ports.RRTypeTXT, host, &ports.DNSError{Kind: ports.DNSTemporary}), false,
			nil, []string{"failed", "verify again later"}},
		{"an error that is not a DNSError", lookupFailed(ports.RRTypeTXT, host, context.DeadlineExceeded), false,
			nil, []string{"verify again later"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := tt.check
			if c.ok != tt.ok {
				t.Fatalf("ok = %v, want %v (problem %q)", c.ok, tt.ok, c.problem)
			}
			if tt.found != nil && strings.Join(c.found, "|") != strings.Join(tt.found, "|") {
				t.Errorf("found = %q, want %q", c.found, tt.found)
			}
			if len(tt.wantParts) == 0 && c.problem != "" {
				t.Errorf("problem = %q, want none", c.problem)
			}
			for _, p := range tt.wantParts {
				if !strings.Contains(c.problem, p) {
					t.Errorf("problem %q does not contain %q", c.problem, p)
				}
			}
		})
	}
}

// TestFoundIsBounded: what a verify answer repeats from DNS is limited in count and size and printable.
func TestFoundIsBounded(t *testing.T) {
	t.Parallel()
	var txts []string
	for range 20 {
		txts = append(txts, "x\r\ny\x00"+strings.Repeat("é", 2000))
	}
	c := checkTXT(ports.RecordDKIM, "h", txts, "v=DKIM1; p=abc")
	if len(c.found) != maxFoundRecords {
		t.Fatalf("found %d records, want %d", len(c.found), maxFoundRecords)
	}
	for _, f := range c.found {
		if len(f) > maxFoundBytes+len("...") || strings.ContainsAny(f, "\r\n\x00") || !strings.HasPrefix(f, "x??y?") {
			t.Fatalf("found record not bounded or not printable: %q...", f[:20])
		}
	}
	if c := checkSPF("h", nil, "v=spf1 include:a.test ~all"); c.found != nil {
		t.Errorf("nothing at the name: found = %#v, want nil", c.found)
	}
}

// TestRecordTypes: every generated record says the DNS type to publish it as.
func TestRecordTypes(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		ports.RecordSPF: "TXT", ports.RecordDKIM: "TXT", ports.RecordDMARC: "TXT",
		ports.RecordReturnPath: "CNAME", ports.RecordTracking: "CNAME",
	}
	records := buildRecords(validConfig().withDefaults(), "d1", "acme.example", "pmabc", "KEY", func() string { return "id" })
	for _, r := range records {
		if r.RecordType != want[r.Type] {
			t.Errorf("%s record type = %q, want %q", r.Type, r.RecordType, want[r.Type])
		}
	}
	// Records read back from the store carry no type; the service fills it in on the way out.
	stored := []ports.DNSRecord{{Type: ports.RecordDKIM}, {Type: ports.RecordTracking}, {Type: "OTHER"}}
	d := withoutPrivateKey(ports.Domain{DKIMPrivateKey: []byte("k"), Records: stored})
	if d.Records[0].RecordType != "TXT" || d.Records[1].RecordType != "CNAME" || d.Records[2].RecordType != "" || d.DKIMPrivateKey != nil {
		t.Errorf("withoutPrivateKey = %+v", d)
	}
}
