package mta_test

import (
	"bytes"
	"net/mail"
	"testing"
	"time"

	"github.com/postmill/postmill/ports"
)

// pipeliningHarness delivers to a raw server offering PIPELINING that answers nothing before the DATA of a
// group: a client that waited for MAIL's reply before sending the RCPTs would time out.
func pipeliningHarness(t *testing.T, opts rawOptions) (*harness, *rawServer) {
	t.Helper()
	opts.Pipelining = true
	return hostileHarness(t, opts)
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

// TestPipelinedReplies: each recipient takes its own reply out of a pipelined group ending in DATA, or in
// BDAT when the server offers CHUNKING (RFC 3030 §4.2: the server reads the chunk whatever it answered
// before), and refusals that leave the session in step keep it for the next message.
func TestPipelinedReplies(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		opts rawOptions // DataCommandReply answers DATA, BdatReply the BDAT that takes its place
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
				DataCommandReply: "503 5.5.1 need RCPT", BdatReply: "503 5.5.1 need RCPT"},
			want: map[string]string{"r1": "bounced|550 5.7.1 sender rejected", "r2": "bounced|550 5.7.1 sender rejected",
				"r3": "bounced|550 5.7.1 sender rejected"},
			keep: true,
		},
		{
			name: "every RCPT refused, DATA answered 354 all the same",
			opts: rawOptions{RcptReplies: []string{"550 5.1.1 no such user"}, BdatReply: "554 5.5.1 no valid recipients"},
			want: map[string]string{"r1": "bounced|550 5.1.1 no such user", "r2": "bounced|550 5.1.1 no such user",
				"r3": "bounced|550 5.1.1 no such user"},
			keep: true,
		},
		{
			name: "DATA or BDAT refused",
			opts: rawOptions{RcptReplies: []string{"250 ok", "550 5.1.1 no such user", "250 ok"},
				DataCommandReply: "554 5.3.4 no", BdatReply: "554 5.3.4 no"},
			want: map[string]string{"r1": "bounced|554 5.3.4 no", "r2": "bounced|550 5.1.1 no such user",
				"r3": "bounced|554 5.3.4 no"},
			keep: true,
		},
		{
			name: "DATA or BDAT deferred",
			opts: rawOptions{DataCommandReply: "451 4.3.0 try later", BdatReply: "451 4.3.0 try later"},
			want: map[string]string{"r1": "deferred|451 4.3.0 try later", "r2": "deferred|451 4.3.0 try later",
				"r3": "deferred|451 4.3.0 try later"},
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
		for _, chunking := range []bool{false, true} {
			name := tc.name + ", DATA"
			if chunking {
				name = tc.name + ", BDAT"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				opts := tc.opts
				opts.Chunking = chunking
				h, srv := pipeliningHarness(t, opts)
				checkReplies(t, h, srv, tc.want, tc.keep)
				if c := srv.Counts(); chunking && c.Datas != 0 || !chunking && c.Bdats != 0 {
					t.Errorf("server saw %+v, want only %s", c, map[bool]string{false: "DATA", true: "BDAT"}[chunking])
				}
			})
		}
	}
}

// checkReplies sends a message to three recipients and then one to a fourth: the first one's outcomes must
// be want, and the second must reuse the session when keep is set and need a new one otherwise.
func checkReplies(t *testing.T, h *harness, srv *rawServer, want map[string]string, keep bool) {
	t.Helper()
	rep, _ := h.Send(outbound(t, "rcpt.test", "a@rcpt.test", "b@rcpt.test", "c@rcpt.test"))
	got := outcomes(rep)
	for id, w := range want {
		if got[id] != w {
			t.Errorf("recipient %s: %q, want %q", id, got[id], w)
		}
	}
	h.Send(outbound(t, "rcpt.test", "d@rcpt.test"))
	wantConns := 2
	if keep {
		wantConns = 1
	}
	if c := srv.Counts(); c.Conns != wantConns {
		t.Errorf("server saw %d connections, want %d", c.Conns, wantConns)
	}
}

// chunkingHarness delivers to a raw server offering PIPELINING and CHUNKING (RFC 3030) that answers
// nothing before the BDAT (or DATA) of a group.
func chunkingHarness(t *testing.T, opts rawOptions, noChunking bool) (*harness, *rawServer) {
	t.Helper()
	opts.Pipelining, opts.Chunking = true, true
	srv := mustRawServer(t, "127.0.0.1", opts)
	r := newResolver().MX("rcpt.test", ports.MX{Host: "mx.rcpt.test"}).IP("mx.rcpt.test", "127.0.0.1")
	cfg := baseConfig(srv.Port())
	cfg.CommandTimeout = 2 * time.Second
	cfg.Concurrency = 1
	cfg.NoChunking = noChunking
	return newHarness(t, cfg, r).start(), srv
}

// TestChunkingSendsTheMessageWithTheEnvelope: with PIPELINING and CHUNKING offered, MAIL, every RCPT and
// one "BDAT <size> LAST" with the whole message go in one group (one round trip a message), the chunk is
// the signed message with CRLF line ends and no dot-stuffing, and the session carries the next message.
// Config.NoChunking keeps to DATA.
func TestChunkingSendsTheMessageWithTheEnvelope(t *testing.T) {
	t.Parallel()
	h, srv := chunkingHarness(t, rawOptions{}, false)
	for range 2 {
		out := outbound(t, "rcpt.test", "a@rcpt.test", "b@rcpt.test")
		out.Text = "Hello there.\n.A line that starts with a dot.\n"
		rep, _ := h.Send(out)
		for id, o := range outcomes(rep) {
			if o != "delivered|250 ok" {
				t.Fatalf("recipient %s: %s", id, o)
			}
		}
	}
	if c := srv.Counts(); c.Conns != 1 || c.Groups != 2 || c.Bdats != 2 || c.Datas != 0 {
		t.Fatalf("server saw %+v; want one session, two groups ending in BDAT and no DATA", c)
	}
	chunk := srv.Chunks()[0]
	msg, err := mail.ReadMessage(bytes.NewReader(chunk))
	if err != nil {
		t.Fatalf("the chunk is not a message: %v\n%s", err, chunk)
	}
	if msg.Header.Get("DKIM-Signature") == "" || msg.Header.Get("Subject") != "Hello" {
		t.Errorf("chunk headers: %v", msg.Header)
	}
	if !bytes.HasSuffix(chunk, []byte("\r\n")) || bytes.Contains(bytes.ReplaceAll(chunk, []byte("\r\n"), nil), []byte("\n")) {
		t.Errorf("the chunk has a bare LF or no final CRLF:\n%q", chunk)
	}
	if !bytes.Contains(chunk, []byte("\r\n.A line that starts with a dot.")) || bytes.Contains(chunk, []byte("\r\n..A line")) {
		t.Errorf("a line starting with a dot is not sent as it is:\n%s", chunk)
	}

	plain, psrv := chunkingHarness(t, rawOptions{}, true)
	rep, _ := plain.Send(outbound(t, "rcpt.test", "a@rcpt.test"))
	if o := outcomes(rep)["r1"]; o != "delivered|250 ok" {
		t.Fatalf("with NoChunking: %s", o)
	}
	if c := psrv.Counts(); c.Bdats != 0 || c.Datas != 1 || c.Contents != 1 {
		t.Fatalf("with NoChunking the server saw %+v; want DATA and no BDAT", c)
	}
}
