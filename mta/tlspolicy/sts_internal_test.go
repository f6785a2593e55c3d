package tlspolicy

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSTSRecordID(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		records []string
		id      string
		ok      bool
	}{
		{"plain", []string{"v=STSv1; id=20160831085700Z;"}, "20160831085700Z", true},
		{"spaces and no final semicolon", []string{"v=STSv1 ;  id=abc123"}, "abc123", true},
		{"other TXT records ignored", []string{"google-site-verification=x", "v=STSv1; id=a1"}, "a1", true},
		{"extension fields ignored", []string{"v=STSv1; id=a1; ext=1"}, "a1", true},
		{"two records", []string{"v=STSv1; id=a1", "v=STSv1; id=a2"}, "", false},
		{"no record", nil, "", false},
		{"id missing", []string{"v=STSv1;"}, "", false},
		{"id too long", []string{"v=STSv1; id=" + strings.Repeat("a", 33)}, "", false},
		{"id with punctuation", []string{"v=STSv1; id=2016-08-31"}, "", false},
		{"version not first", []string{"id=a1; v=STSv1"}, "", false},
		{"leading space", []string{" v=STSv1; id=a1"}, "", false},
		{"other version", []string{"v=STSv2; id=a1"}, "", false},
	}
	for _, tc := range cases {
		id, ok := stsRecordID(tc.records)
		if id != tc.id || ok != tc.ok {
			t.Errorf("%s: stsRecordID(%q) = %q, %v; want %q, %v", tc.name, tc.records, id, ok, tc.id, tc.ok)
		}
	}
}

func TestParseSTSPolicy(t *testing.T) {
	t.Parallel()
	p, err := parseSTSPolicy("version: STSv1\r\nmode: enforce\r\nmx: mail.example.com\r\nmx: *.Example.NET.\r\nmax_age: 604800\r\nunknown: kept out\r\n")
	if err != nil {
		t.Fatal(err)
	}
	if p.mode != stsEnforce || p.maxAge != 7*24*time.Hour || !slices.Equal(p.mx, []string{"mail.example.com", "*.example.net"}) {
		t.Fatalf("policy %+v", p)
	}
	if _, err := parseSTSPolicy("version: STSv1\nmode: none\nmax_age: 0\n"); err != nil {
		t.Errorf("mode none without mx, LF line ends: %v", err)
	}
	bad := map[string]string{
		"no version":          "mode: enforce\nmx: a.example\nmax_age: 1\n",
		"other version":       "version: STSv2\nmode: enforce\nmx: a.example\nmax_age: 1\n",
		"unknown mode":        "version: STSv1\nmode: strict\nmx: a.example\nmax_age: 1\n",
		"no max_age":          "version: STSv1\nmode: enforce\nmx: a.example\n",
		"max_age over a year": "version: STSv1\nmode: enforce\nmx: a.example\nmax_age: 31557601\n",
		"max_age negative":    "version: STSv1\nmode: enforce\nmx: a.example\nmax_age: -1\n",
		"enforce without mx":  "version: STSv1\nmode: enforce\nmax_age: 1\n",
		"mode twice":          "version: STSv1\nmode: testing\nmode: enforce\nmx: a.example\nmax_age: 1\n",
		"wildcard inside":     "version: STSv1\nmode: enforce\nmx: a.*.example\nmax_age: 1\n",
		"not key value":       "version: STSv1\nmode enforce\nmx: a.example\nmax_age: 1\n",
		"an HTML page":        "<html><body>not found</body></html>",
		"too many mx":         "version: STSv1\nmode: enforce\nmax_age: 1\n" + strings.Repeat("mx: a.example\n", maxPolicyMX+1),
	}
	for name, body := range bad {
		if _, err := parseSTSPolicy(body); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestSTSPolicyMatches(t *testing.T) {
	t.Parallel()
	p := &stsPolicy{mx: []string{"mail.example.com", "*.example.net"}}
	for host, want := range map[string]bool{
		"mail.example.com":  true,
		"MAIL.example.com.": true,
		"mx1.example.net":   true,
		"example.net":       false, // a wildcard stands for one label, never none
		"a.b.example.net":   false, // nor two
		"mail.example.org":  false,
		"xmail.example.com": false,
		"mx1.example.net.x": false,
	} {
		if got := p.matches(host); got != want {
			t.Errorf("matches(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestParseRUA(t *testing.T) {
	t.Parallel()
	got := parseRUA([]string{"v=TLSRPTv1; rua=mailto:tlsrpt@example.com, https://reports.example.com/v1/tlsrpt,ftp://no", "unrelated"})
	if want := []string{"mailto:tlsrpt@example.com", "https://reports.example.com/v1/tlsrpt"}; !slices.Equal(got, want) {
		t.Errorf("rua %q, want %q", got, want)
	}
	if got := parseRUA([]string{"v=TLSRPTv1; rua=mailto:a@x", "v=TLSRPTv1; rua=mailto:b@x"}); got != nil {
		t.Errorf("two records: %q, want none", got)
	}
}
