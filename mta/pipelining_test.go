package mta_test

import (
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

// pipeliningHarness delivers to a raw server offering PIPELINING that answers nothing before the DATA of a
// group: a client that waited for MAIL's reply before sending the RCPTs would time out.
func pipeliningHarness(t *testing.T, opts rawOptions) (*harness, *rawServer) {
	t.Helper()
	opts.Pipelining = true
	srv := mustRawServer(t, "127.0.0.1", opts)
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	cfg := baseConfig(srv.Port())
	cfg.CommandTimeout = 2 * time.Second
	cfg.Concurrency = 1
	return newHarness(t, cfg, r).start(), srv
}

// TestPipeliningSendsTheEnvelopeInOneGroup: with PIPELINING offered, MAIL, every RCPT and DATA of a
// transaction go in one group and the message is delivered to every recipient; the next message reuses
// the session.
func TestPipeliningSendsTheEnvelopeInOneGroup(t *testing.T) {
	t.Parallel()
	h, srv := pipeliningHarness(t, rawOptions{})
	for range 2 {
		rep, _ := h.Send(outbound(t, "rcpt.test", "a@rcpt.test", "b@rcpt.test", "c@rcpt.test"))
		for id, o := range outcomes(rep) {
			if o != "delivered|250 ok" {
				t.Fatalf("recipient %s: %s", id, o)
			}
		}
	}
	if c := srv.Counts(); c.Conns != 1 || c.Groups != 2 || c.Contents != 2 {
		t.Fatalf("server saw %+v; want one session with two groups and two contents", c)
	}
}

// TestPipelinedReplies: each recipient takes its own reply out of a pipelined group, and refusals that
// leave the session in step keep it for the next message.
func TestPipelinedReplies(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		opts rawOptions
		want map[string]string
		// keep: the session serves the next message (one connection in all).
		keep bool
	}{
		{
			name: "RCPTs refused one by one",
			opts: rawOptions{RcptReplies: []string{"250 ok", "550 5.1.1 no such user", "450 4.2.1 mailbox busy"}},
			want: map[string]string{
				"r1": "delivered|250 ok", "r2": "bounced|550 5.1.1 no such user", "r3": "deferred|450 4.2.1 mailbox busy",
			},
			keep: true,
		},
		{
			name: "MAIL refused",
			opts: rawOptions{MailReply: "550 5.7.1 sender rejected", RcptReplies: []string{"503 5.5.1 need MAIL"},
				DataCommandReply: "503 5.5.1 need RCPT"},
			want: map[string]string{"r1": "bounced|550 5.7.1 sender rejected", "r2": "bounced|550 5.7.1 sender rejected",
				"r3": "bounced|550 5.7.1 sender rejected"},
			keep: true,
		},
		{
			name: "every RCPT refused and DATA answered 354 all the same",
			opts: rawOptions{RcptReplies: []string{"550 5.1.1 no such user"}},
			want: map[string]string{"r1": "bounced|550 5.1.1 no such user", "r2": "bounced|550 5.1.1 no such user",
				"r3": "bounced|550 5.1.1 no such user"},
			keep: true,
		},
		{
			name: "DATA refused",
			opts: rawOptions{RcptReplies: []string{"250 ok", "550 5.1.1 no such user", "250 ok"}, DataCommandReply: "554 5.3.4 no"},
			want: map[string]string{"r1": "bounced|554 5.3.4 no", "r2": "bounced|550 5.1.1 no such user",
				"r3": "bounced|554 5.3.4 no"},
			keep: true,
		},
		{
			name: "421 to a RCPT",
			opts: rawOptions{RcptReplies: []string{"250 ok", "421 4.7.0 closing"}},
			want: map[string]string{"r1": "deferred|421 4.7.0 closing", "r2": "deferred|421 4.7.0 closing",
				"r3": "deferred|421 4.7.0 closing"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, srv := pipeliningHarness(t, tc.opts)
			rep, _ := h.Send(outbound(t, "rcpt.test", "a@rcpt.test", "b@rcpt.test", "c@rcpt.test"))
			got := outcomes(rep)
			for id, want := range tc.want {
				if got[id] != want {
					t.Errorf("recipient %s: %q, want %q", id, got[id], want)
				}
			}
			h.Send(outbound(t, "rcpt.test", "d@rcpt.test"))
			wantConns := 2
			if tc.keep {
				wantConns = 1
			}
			if c := srv.Counts(); c.Conns != wantConns {
				t.Errorf("server saw %d connections, want %d", c.Conns, wantConns)
			}
		})
	}
}
