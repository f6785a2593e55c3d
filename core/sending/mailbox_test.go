package sending

import (
	"net/mail"
	"slices"
	"strings"
	"testing"

	"github.com/postmill/postmill/ports"
)

func TestParseMailbox(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in         string
		name, addr string
		ok, nameOK bool
	}{
		{"ada@example.org", "", "ada@example.org", true, true},
		{"  <ada@example.org> ", "", "ada@example.org", true, true},
		{"Ada Lovelace <ada@example.org>", "Ada Lovelace", "ada@example.org", true, true},
		{`"Lovelace, Ada" <ada@example.org>`, "Lovelace, Ada", "ada@example.org", true, true},
		{`"Re: \"Ada\"" <ada@example.org>`, `Re: "Ada"`, "ada@example.org", true, true},
		{"=?utf-8?q?Ad=C3=A1_L?= <ada@example.org>", "Adá L", "ada@example.org", true, true},
		{"=?ISO-8859-1?Q?Ad=E1?= <ada@example.org>", "Adá", "ada@example.org", true, true},
		{"Adá 🚀 <ada@example.org>", "Adá 🚀", "ada@example.org", true, true},
		{"jöhn@example.org", "", "jöhn@example.org", true, true},
		{"ada@example.org (Ada)", "Ada", "ada@example.org", true, true},
		{"=?utf-8?q?A=0D=0AB?= <ada@example.org>", "A\r\nB", "ada@example.org", true, false},
		{"Friends: ada@example.org;", "", "", false, false},
		{"Undisclosed recipients:;", "", "", false, false},
		{"ada@example.org, bob@example.org", "", "", false, false},
		{"Ada <ada@[192.0.2.1]>", "", "", false, false},
		{"Ada <ada@localhost>", "", "", false, false},
		{`"ada lovelace"@example.org`, "", "", false, false},
		{"Ada <ada@example.org", "", "", false, false},
		{"Ada", "", "", false, false},
		{"", "", "", false, false},
		{"Ada\x00 <ada@example.org>", "", "", false, false},
		{"Ada\n <ada@example.org>", "", "", false, false},
		{"\xff <ada@example.org>", "", "", false, false},
		{strings.Repeat("n", 981) + " <ada@example.org>", "", "", false, false}, // 999 characters
	} {
		name, addr, ok, nameOK := parseMailbox(c.in)
		if name != c.name || addr != c.addr || ok != c.ok || nameOK != c.nameOK {
			t.Errorf("parseMailbox(%q) = %q %q %v %v, want %q %q %v %v", c.in, name, addr, ok, nameOK, c.name, c.addr, c.ok, c.nameOK)
		}
	}
}

// TestHeaderMailboxRoundTrips: whatever display name a sender gives, the To or Cc field built from it
// parses back to the same name and address (the MTA's parser, go-message's, is net/mail's with more
// charsets; the e2e tests read the delivered headers); non-ASCII names travel as RFC 2047 encoded words,
// so the header stays ASCII.
func TestHeaderMailboxRoundTrips(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		"", "Ada", "Ada Lovelace", "Lovelace, Ada", `Ada "the Countess" Lovelace`, `back\slash`, "Adá Lovelace",
		"Grüße 🚀", "=?utf-8?q?not-an-encoded-word?=", "a <b@c.example>", "semi; colon: and (paren)", strings.Repeat("long ", 40),
		strings.Repeat("ü", 400), // its encoded form is longer than a header line
	} {
		r := ports.Recipient{Type: ports.RecipientTo, Address: "ada@example.org", Name: strings.TrimSpace(name)}
		h := headerMailbox(r)
		if name == "" && h != "ada@example.org" {
			t.Errorf("no name: %q", h)
		}
		if a, err := mail.ParseAddress(h); err != nil || a.Name != r.Name || a.Address != r.Address {
			t.Errorf("%q (from name %q) parses to %+v (%v)", h, r.Name, a, err)
		}
		if r.Name != "" && strings.ContainsFunc(h, func(c rune) bool { return c > 0x7e }) {
			t.Errorf("header mailbox %q is not ASCII", h)
		}
		// A normalised value goes through validation and recipientOf unchanged.
		if got := recipientOf(ports.RecipientCc, h); got.Name != r.Name || got.Address != r.Address || got.Type != ports.RecipientCc {
			t.Errorf("recipientOf(%q) = %+v", h, got)
		}
	}
}

// TestDedupeRecipientsComparesAddresses: a repeated address keeps its first occurrence, display name and
// all, whatever names the later ones carry; every stored address is bare.
func TestDedupeRecipientsComparesAddresses(t *testing.T) {
	t.Parallel()
	req := validRequest()
	req.To = []string{"Ada Lovelace <ada@example.org>", "bob@example.org"}
	req.Cc = []string{"Countess <ADA@example.org>", `"Carol" <carol@example.org>`}
	req.Bcc = []string{"Bob B <bob@example.org>", "Dave <dave@example.org>"}
	req, v := validateSend(req)
	if len(v) != 0 {
		t.Fatal(v)
	}
	got := dedupeRecipients(req.To, req.Cc, req.Bcc)
	want := []ports.Recipient{
		{Type: ports.RecipientTo, Address: "ada@example.org", Name: "Ada Lovelace"},
		{Type: ports.RecipientTo, Address: "bob@example.org"},
		{Type: ports.RecipientCc, Address: "carol@example.org", Name: "Carol"},
		{Type: ports.RecipientBcc, Address: "dave@example.org", Name: "Dave"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("dedupeRecipients:\n got %+v\nwant %+v", got, want)
	}
}

// TestBuildOutboundWritesDisplayNames: the To and Cc lists the MTA writes carry each recipient's display
// name; Bcc recipients stay out of them.
func TestBuildOutboundWritesDisplayNames(t *testing.T) {
	t.Parallel()
	msg := ports.Message{ID: "0190a0b0-0000-7000-8000-000000000001", From: "Acme <news@acme.example>", Recipients: []ports.Recipient{
		{ID: "0190a0b0-0000-7000-8000-00000000000a", Type: ports.RecipientTo, Address: "ada@example.org", Name: "Adá Lovelace"},
		{ID: "0190a0b0-0000-7000-8000-00000000000b", Type: ports.RecipientTo, Address: "bob@example.org"},
		{ID: "0190a0b0-0000-7000-8000-00000000000c", Type: ports.RecipientCc, Address: "carol@example.org", Name: "Lovelace, Carol"},
		{ID: "0190a0b0-0000-7000-8000-00000000000d", Type: ports.RecipientBcc, Address: "dave@example.org", Name: "Dave"},
	}}
	out := buildOutbound(ports.DeliveryJob{ID: "0190a0b0-0000-7000-8000-0000000000f0"}, msg, ports.Domain{Name: "acme.example"},
		msg.Recipients, nil, []byte("0123456789abcdef0123456789abcdef"))
	if want := []string{"=?utf-8?q?Ad=C3=A1_Lovelace?= <ada@example.org>", "bob@example.org"}; !slices.Equal(out.To, want) {
		t.Errorf("To %q, want %q", out.To, want)
	}
	if want := []string{`"Lovelace, Carol" <carol@example.org>`}; !slices.Equal(out.Cc, want) {
		t.Errorf("Cc %q, want %q", out.Cc, want)
	}
}

// FuzzParseMailbox: whatever a caller sends, an accepted mailbox has a valid bare address, and its
// canonical form is one header line that parses back to the same name and address.
func FuzzParseMailbox(f *testing.F) {
	for _, s := range []string{"ada@example.org", "Ada Lovelace <ada@example.org>", `"L, A" <a@example.org>`,
		"=?utf-8?q?Ad=C3=A1?= <a@example.org>", "Friends: a@example.org;", "a@example.org (c)", "jöhn@example.org"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		name, addr, ok, nameOK := parseMailbox(raw)
		if !ok {
			return
		}
		if !validAddrSpec(addr) {
			t.Fatalf("%q gave the invalid address %q", raw, addr)
		}
		if !nameOK {
			return
		}
		canonical := normaliseMailbox(name, addr)
		if strings.ContainsAny(canonical, "\r\n\x00") {
			t.Fatalf("%q normalises to %q, more than one line", raw, canonical)
		}
		if r := recipientOf(ports.RecipientTo, canonical); r.Name != name || r.Address != addr {
			t.Fatalf("%q normalises to %q, which splits into %q %q", raw, canonical, r.Name, r.Address)
		}
	})
}

// TestLongEncodedNameValidatesAgain: a name whose RFC 2047 form is longer than a header line is judged by
// its decoded length, so the canonical form validateSend returns passes validateSend again unchanged.
func TestLongEncodedNameValidatesAgain(t *testing.T) {
	t.Parallel()
	req := validRequest()
	req.To = []string{strings.Repeat("ü", 400) + " <a@example.com>"}
	once, v := validateSend(req)
	if len(v) != 0 || len(once.To[0]) <= maxHeaderLineLen {
		t.Fatalf("violations %+v; canonical form of %d bytes", v, len(once.To[0]))
	}
	twice, v := validateSend(once)
	if len(v) != 0 || !slices.Equal(twice.To, once.To) {
		t.Errorf("second validation: %+v, %q", v, twice.To)
	}
	if r := recipientOf(ports.RecipientTo, twice.To[0]); r.Name != strings.Repeat("ü", 400) || r.Address != "a@example.com" {
		t.Errorf("recipient %+v", r)
	}
}
