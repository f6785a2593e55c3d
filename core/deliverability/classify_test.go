package deliverability

import (
	"testing"

	"github.com/postmill/postmill/ports"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		part       ports.DSNRecipient
		wantType   string
		wantStatus string
	}{
		{"failed 5.1.1", ports.DSNRecipient{Action: "failed", Status: "5.1.1"}, ports.BounceHard, "5.1.1"},
		{"failed with a 4.x status is soft", ports.DSNRecipient{Action: "failed", Status: "4.2.2"}, ports.BounceSoft, "4.2.2"},
		{"delayed is soft even with a 5.x status", ports.DSNRecipient{Action: "delayed", Status: "5.0.0"}, ports.BounceSoft, "5.0.0"},
		{"delayed without any code is soft", ports.DSNRecipient{Action: "delayed"}, ports.BounceSoft, ""},
		{"action letter case is ignored", ports.DSNRecipient{Action: "Failed", Status: "5.2.1"}, ports.BounceHard, "5.2.1"},
		{"delivered is no failure", ports.DSNRecipient{Action: "delivered", Status: "2.0.0"}, "", ""},
		{"relayed is no failure even with a 5.x status", ports.DSNRecipient{Action: "relayed", Status: "5.0.0"}, "", ""},
		{"expanded is no failure", ports.DSNRecipient{Action: "expanded", Status: "2.0.0"}, "", ""},
		{"status with a comment", ports.DSNRecipient{Action: "failed", Status: "5.1.1 (bad destination mailbox)"}, ports.BounceHard, "5.1.1"},
		{
			"missing status: enhanced code from the diagnostic",
			ports.DSNRecipient{Action: "failed", DiagnosticCode: "smtp; 550 5.7.1 Message rejected as spam"},
			ports.BounceHard, "5.7.1",
		},
		{
			"missing status: a 4.x enhanced code makes a failed part soft",
			ports.DSNRecipient{Action: "failed", DiagnosticCode: "smtp; 452 4.2.2 Mailbox full"},
			ports.BounceSoft, "4.2.2",
		},
		{
			"missing status: reply code only",
			ports.DSNRecipient{Action: "failed", DiagnosticCode: "smtp; 554 Transaction failed"},
			ports.BounceHard, "",
		},
		{
			"missing status: 4xx reply code only",
			ports.DSNRecipient{Action: "failed", DiagnosticCode: "smtp;421 Too many connections"},
			ports.BounceSoft, "",
		},
		{
			"non-standard bounce: no action, code in the text",
			ports.DSNRecipient{DiagnosticCode: "Remote host said: 550-5.1.1 The email account does not exist"},
			ports.BounceHard, "5.1.1",
		},
		{
			"malformed status falls back to the diagnostic",
			ports.DSNRecipient{Action: "failed", Status: "5.1", DiagnosticCode: "smtp; 450 4.7.1 Greylisted"},
			ports.BounceSoft, "4.7.1",
		},
		{
			"an IP address is not an enhanced code",
			ports.DSNRecipient{DiagnosticCode: "x-unix; host 10.5.1.25 said: 550 rejected"},
			ports.BounceHard, "",
		},
		{
			"version and port numbers are no codes",
			ports.DSNRecipient{Action: "failed", DiagnosticCode: "x-unix; agent 4.5 on port 4500 crashed"},
			ports.BounceHard, "",
		},
		{"failed without any code is hard", ports.DSNRecipient{Action: "failed", DiagnosticCode: "x-unix; mailbox gone"}, ports.BounceHard, ""},
		{"nothing to judge by", ports.DSNRecipient{Action: "", DiagnosticCode: "no idea"}, "", ""},
		{"unknown action without code", ports.DSNRecipient{Action: "weird"}, "", ""},
		{"2.x status with failed action is hard", ports.DSNRecipient{Action: "failed", Status: "2.0.0"}, ports.BounceHard, "2.0.0"},
		{"2.x status without action is no failure", ports.DSNRecipient{Status: "2.0.0"}, "", "2.0.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := classify(tt.part)
			if got.Type != tt.wantType || got.Status != tt.wantStatus {
				t.Errorf("classify(%+v) = {%q %q}, want {%q %q}", tt.part, got.Type, got.Status, tt.wantType, tt.wantStatus)
			}
		})
	}
}

func TestEnhancedCode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in    string
		whole bool
		want  string
	}{
		{"5.1.1", true, "5.1.1"},
		{"4.4.7 (delivery time expired)", true, "4.4.7"},
		{"5.123.999", true, "5.123.999"},
		{"5.1234.1", true, ""},
		{"5.1", true, ""},
		{"3.1.1", true, ""},
		{" 5.1.1", true, ""}, // callers trim first; whole means at the start
		{"x 5.1.1", true, ""},
		{"550 5.1.1 user unknown", false, "5.1.1"},
		{"550-5.1.1", false, "5.1.1"},
		{"2.0.0 ok", false, ""},
		{"said 192.0.2.1 then 4.7.0", false, "4.7.0"},
		{"5.1.1.2", false, ""},
		{"45.1.1", false, ""},
		{"", false, ""},
	}
	for _, tt := range tests {
		if got := enhancedCode(tt.in, tt.whole); got != tt.want {
			t.Errorf("enhancedCode(%q, %v) = %q, want %q", tt.in, tt.whole, got, tt.want)
		}
	}
}

func TestReplyCode(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"550 user unknown", "550"},
		{"550-first line", "550"},
		{"host said: 451 try later", "451"},
		{"460 not a reply code", ""}, // second digit 6 is outside RFC 5321 §4.2.1
		{"250 ok", ""},
		{"port 4500 closed", ""},
		{"v5.50", ""},
		{"a550", ""},
		{"55", ""},
	}
	for _, tt := range tests {
		if got := replyCode(tt.in); got != tt.want {
			t.Errorf("replyCode(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestDiagnosticText(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"smtp; 550 5.1.1 no", "550 5.1.1 no"},
		{"X-Postfix; host unreachable", "host unreachable"},
		{" 550 no such user; sorry", "550 no such user; sorry"},
		{"550 no", "550 no"},
	}
	for _, tt := range tests {
		if got := diagnosticText(tt.in); got != tt.want {
			t.Errorf("diagnosticText(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
