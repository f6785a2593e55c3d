package bounceclass

import (
	"bufio"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/postmill/postmill/ports"
)

// TestProviderReplies classifies every reply of testdata/replies.tsv, the providers' published wording, and
// checks that each class a reply can have appears there at least once.
func TestProviderReplies(t *testing.T) {
	t.Parallel()
	f, err := os.Open("testdata/replies.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]bool{}
	n := 0
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if strings.TrimSpace(text) == "" || strings.HasPrefix(text, "#") {
			continue
		}
		cols := strings.SplitN(text, "\t", 3)
		if len(cols) != 3 {
			t.Fatalf("line %d: want class, source and reply separated by tabs: %q", line, text)
		}
		want, source, reply := cols[0], cols[1], cols[2]
		if !slices.Contains(Classes(), want) {
			t.Fatalf("line %d: %q is not a class", line, want)
		}
		n++
		seen[want] = true
		// A DSN's Diagnostic-Code carries its type; the feedback path strips it before classifying.
		if typ, rest, ok := strings.Cut(reply, ";"); ok && typ == "smtp" {
			reply = strings.TrimSpace(rest)
		}
		if got := ClassifyReply(reply); got != want {
			t.Errorf("line %d (%s): %q\n  got %s, want %s", line, source, reply, got, want)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 40 {
		t.Errorf("%d replies, want at least 40", n)
	}
	for _, c := range Classes() {
		if !seen[c] {
			t.Errorf("no reply of class %s in testdata", c)
		}
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in         string
		code, stat string
	}{
		{"550 5.1.1 <a@b>: user unknown", "550", "5.1.1"},
		{"550-5.1.1 The email account", "550", "5.1.1"},
		{"  421 4.7.0 busy ", "421", "4.7.0"},
		{"4.4.2 connection failed: x", "", "4.4.2"},
		{"554 delivery error: dd", "554", ""},
		{"550", "550", ""},
		{"5500 nope", "", ""},
		{"250 2.0.0 ok", "", ""},
		{"550 5.1.1.1 not a status", "550", ""},
		{"", "", ""},
	}
	for _, tt := range tests {
		got := Parse(tt.in)
		if got.Code != tt.code || got.Status != tt.stat || got.Text != strings.TrimSpace(tt.in) {
			t.Errorf("Parse(%q) = %+v, want code %q status %q", tt.in, got, tt.code, tt.stat)
		}
	}
}

// TestClassifyTiers pins the order of the tiers: the Status field before a code in the words, a specific
// code before the words, the words before a generic code's subject, and the subject before the reply code.
func TestClassifyTiers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		r    Reply
		want string
	}{
		{"a specific status beats words", Reply{Code: "550", Status: "5.1.1", Text: "550 5.1.1 spam detected"}, ports.BounceClassBadMailbox},
		{"the status field before a code in the words", Reply{Status: "5.2.2", Text: "550 5.1.1 whatever"}, ports.BounceClassMailboxFull},
		{"a generic status field gives way to a code in the words", Reply{Status: "5.0.0", Text: "smtp; 550 5.1.1 nope"}, ports.BounceClassBadMailbox},
		{"class-bound status: 4.7.28 throttles", Reply{Status: "4.7.28"}, ports.BounceClassRateLimited},
		{"class-bound status: 5.7.28 blocks", Reply{Status: "5.7.28"}, ports.BounceClassSpamBlock},
		{"gmail's 4.2.1 is not a disabled mailbox", Reply{Code: "450", Status: "4.2.1", Text: "try later"}, ports.BounceClassTransient},
		{"5.2.1 is a disabled mailbox", Reply{Code: "550", Status: "5.2.1"}, ports.BounceClassInactiveMailbox},
		{"words decide a generic 5.7.1", Reply{Status: "5.7.1", Text: "Relay access denied"}, ports.BounceClassRelayDenied},
		{"subject of a generic code without telling words", Reply{Status: "5.7.0", Text: "nope"}, ports.BounceClassPolicyBlock},
		{"x.6 subject is content", Reply{Status: "5.6.0", Text: "nope"}, ports.BounceClassContent},
		{"x.1.0 is left to the reply code", Reply{Code: "550", Status: "5.1.0", Text: "nope"}, ports.BounceClassUnknown},
		{"5.4.1 without exchange's words is routing", Reply{Status: "5.4.1", Text: "no answer from host"}, ports.BounceClassRouting},
		{"reply code 556", Reply{Code: "556", Text: "556 nope"}, ports.BounceClassBadDomain},
		{"reply code 552", Reply{Code: "552", Text: "552 nope"}, ports.BounceClassMailboxFull},
		{"any other 4yz", Reply{Code: "454", Text: "454 nope"}, ports.BounceClassTransient},
		{"a transient rule does not fire on a 5yz", Reply{Code: "554", Text: "554 please try again later"}, ports.BounceClassUnknown},
		{"an IP address is no status", Reply{Text: "550 rejected from 5.1.1.4"}, ports.BounceClassUnknown},
		{"yahoo's diagnostic numbers are no status", Reply{Code: "421", Text: "421 nope - 4.16.55.1"}, ports.BounceClassTransient},
		{"nothing at all", Reply{}, ports.BounceClassUnknown},
	}
	for _, tt := range tests {
		if got := Classify(tt.r); got != tt.want {
			t.Errorf("%s: Classify(%+v) = %s, want %s", tt.name, tt.r, got, tt.want)
		}
	}
}

func TestSuppresses(t *testing.T) {
	t.Parallel()
	want := []string{ports.BounceClassBadMailbox, ports.BounceClassBadDomain, ports.BounceClassInactiveMailbox}
	for _, c := range Classes() {
		if got := Suppresses(c); got != slices.Contains(want, c) {
			t.Errorf("Suppresses(%s) = %v", c, got)
		}
	}
	if Suppresses("") {
		t.Error(`Suppresses("") = true`)
	}
}

// TestHostileText: a reply of any size and bytes is classified without panicking, and only its first
// maxText bytes are looked at.
func TestHostileText(t *testing.T) {
	t.Parallel()
	long := "550 " + strings.Repeat("x", maxText) + " user unknown"
	if got := ClassifyReply(long); got != ports.BounceClassUnknown {
		t.Errorf("words past maxText decided: %s", got)
	}
	for _, s := range []string{"5", "5.", "5.1.", "4.1.1.", "\x00\xff550 5.1.1", "550 5.1.1111 x", "5.1234.1"} {
		_ = ClassifyReply(s)
	}
}

func FuzzClassifyReply(f *testing.F) {
	f.Add("550 5.1.1 <a@b>: user unknown")
	f.Add("421-4.7.28 rate limited")
	f.Add("5.1.2 x")
	f.Fuzz(func(t *testing.T, s string) {
		if c := ClassifyReply(s); !slices.Contains(Classes(), c) {
			t.Fatalf("ClassifyReply(%q) = %q, not a class", s, c)
		}
	})
}

// FuzzTextRulesAgree: a text rule split into alternatives with literal prefilters matches exactly when its
// whole expression does.
func FuzzTextRulesAgree(f *testing.F) {
	f.Add("550 5.1.1 the email account that you tried to reach does not exist")
	f.Add("the user account is disabled; mailbox is full")
	f.Add("dkim=fail spf aligned not aligned relay access denied")
	f.Fuzz(func(t *testing.T, s string) {
		s = strings.ToLower(s)
		for i, r := range textRules {
			whole := regexp.MustCompile(r.text).MatchString(s)
			if got := compiled.text[i].matchesText(s); got != whole {
				t.Fatalf("rule %d (%s) on %q: split %v, whole %v", i, r.class, s, got, whole)
			}
		}
	})
}
