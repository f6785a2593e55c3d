package mta_test

import (
	"strings"
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

// hostileHarness delivers to a raw server with opts, PIPELINING offered or not.
func hostileHarness(t *testing.T, opts rawOptions) (*harness, *rawServer) {
	t.Helper()
	srv := mustRawServer(t, "127.0.0.1", opts)
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	cfg := baseConfig(srv.Port())
	cfg.CommandTimeout = 2 * time.Second
	cfg.Concurrency = 1
	return newHarness(t, cfg, r).start(), srv
}

// sessionShapes are the ways a transaction is spoken: one command at a time, pipelined (RFC 2920), and
// pipelined with the content as a BDAT chunk (RFC 3030).
var sessionShapes = []struct {
	name                 string
	pipelining, chunking bool
}{{"one command at a time", false, false}, {"PIPELINING", true, false}, {"PIPELINING and CHUNKING", true, true}}

// TestBareReplyCodes: a reply line may be its code alone (RFC 5321 §4.2: "Reply-code [ SP textstring ]
// CRLF"), and the client acts on the code. A bare 250 after the content delivers (once), a bare 550 to a
// RCPT bounces that recipient while the others are delivered, with or without PIPELINING and BDAT.
func TestBareReplyCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range sessionShapes {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, srv := hostileHarness(t, rawOptions{
				Pipelining: tc.pipelining, Chunking: tc.chunking,
				MailReply: "250", RcptReplies: []string{"250", "550", "250 ok"}, DataCommandReply: "354",
				DataReply: "250", BdatReply: "250",
			})
			rep, _ := h.Send(outbound(t, "rcpt.test", "a@rcpt.test", "b@rcpt.test", "c@rcpt.test"))
			got := outcomes(rep)
			for id, want := range map[string]string{"r1": "delivered|250", "r2": "bounced|550", "r3": "delivered|250"} {
				if strings.TrimSpace(got[id]) != want {
					t.Errorf("recipient %s: %q, want %q", id, got[id], want)
				}
			}
			if c := srv.Counts(); c.Contents+c.Bdats != 1 {
				t.Errorf("server saw %+v: want the content once", c)
			}
			// The session is in step: the next message goes over it.
			rep, _ = h.Send(outbound(t, "rcpt.test", "d@rcpt.test"))
			if got := outcomes(rep); strings.TrimSpace(got["r1"]) != "delivered|250" {
				t.Errorf("next message: %v", got)
			}
			if c := srv.Counts(); c.Conns != 1 {
				t.Errorf("server saw %d connections, want 1", c.Conns)
			}
		})
	}
}

// TestUnsolicitedRepliesRetireTheSession: a server that writes replies nobody asked for after accepting a
// message (here, in a write of their own after a pause, so they arrive after the reply was read) has a
// session out of step. The next message must not read them as the answers to its own commands: it goes
// over a new connection, and each recipient's outcome is the reply to its own RCPT.
func TestUnsolicitedRepliesRetireTheSession(t *testing.T) {
	t.Parallel()
	for _, tc := range sessionShapes {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, srv := hostileHarness(t, rawOptions{
				Pipelining: tc.pipelining, Chunking: tc.chunking,
				RcptReplies: []string{"550 5.1.1 no such user"},
				Unsolicited: []string{"250 2.0.0 stale1", "250 2.0.0 stale2", "354 stale3", "250 2.0.0 stale4"},
				AcceptFirst: true,
			})
			rep, _ := h.Send(outbound(t, "rcpt.test", "a@rcpt.test"))
			if got := outcomes(rep); got["r1"] != "delivered|250 ok" {
				t.Fatalf("first message: %v", got)
			}
			time.Sleep(200 * time.Millisecond) // the unsolicited lines arrive
			rep, _ = h.Send(outbound(t, "rcpt.test", "b@rcpt.test"))
			if got := outcomes(rep); got["r1"] != "bounced|550 5.1.1 no such user" {
				t.Errorf("second message (refused by its RCPT): %v", got)
			}
			if c := srv.Counts(); c.Conns != 2 {
				t.Errorf("server saw %d connections, want 2 (the session with unread replies retired)", c.Conns)
			}
		})
	}
}

// A server that offers CHUNKING but answers BDAT as an unknown command (502) is not a verdict on the
// message: the recipients are deferred, not bounced, and the next attempt to that host uses DATA and is
// delivered.
func TestBDATRefusedAsUnknownFallsBackToDATA(t *testing.T) {
	t.Parallel()
	h, srv := hostileHarness(t, rawOptions{Pipelining: true, Chunking: true, BdatReply: "502 5.5.1 command not implemented"})
	rep, _ := h.Send(outbound(t, "rcpt.test", "a@rcpt.test"))
	if got := outcomes(rep)["r1"]; !strings.HasPrefix(got, "deferred|4.5.0 BDAT refused") {
		t.Fatalf("first attempt: %q, want deferred", got)
	}
	rep, _ = h.Send(outbound(t, "rcpt.test", "a@rcpt.test"))
	if got := outcomes(rep)["r1"]; got != "delivered|250 ok" {
		t.Fatalf("second attempt: %q, want delivered over DATA", got)
	}
	if c := srv.Counts(); c.Bdats != 1 || c.Datas != 1 || c.Contents != 1 {
		t.Errorf("server saw %+v: want one BDAT, then one DATA with the content", c)
	}
}
