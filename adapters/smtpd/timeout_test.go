package smtpd_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/smtpd"
)

// readUntilClosed reads reply lines until the server closes the connection, failing the test if that takes
// longer than the bound (a bound on failure, not a measurement).
func readUntilClosed(t *testing.T, conn net.Conn, r *bufio.Reader) []string {
	t.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for {
		line, err := r.ReadString('\n')
		if line != "" {
			lines = append(lines, strings.TrimRight(line, "\r\n"))
		}
		// A reset is a close too: a server that closes with the client's later lines unread resets.
		if err == io.EOF || errors.Is(err, syscall.ECONNRESET) {
			return lines
		}
		if err != nil {
			t.Fatalf("the server did not close the connection (read: %v); replies %q", err, lines)
		}
	}
}

// mustStartData opens a transaction and its DATA, reading each reply through its last line.
func mustStartData(t *testing.T, conn net.Conn, r *bufio.Reader) {
	t.Helper()
	for _, c := range []string{"EHLO relay.example", "MAIL FROM:<a@example.org>", "RCPT TO:<b@example.net>", "DATA"} {
		if _, err := conn.Write([]byte(c + "\r\n")); err != nil {
			t.Fatal(err)
		}
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("%s: %v", c, err)
			}
			if len(line) > 3 && line[3] == ' ' {
				break
			}
		}
	}
}

// A client that never finishes a command line is answered 421 and disconnected at the first read timeout,
// not served its partial command and given another timeout's worth (a slow-loris holding a slot for ever).
func TestUnfinishedCommandIsCutAtTheReadTimeout(t *testing.T) {
	t.Parallel()
	b := MustNewServerWith(t, smtpd.Config{ReadTimeout: 300 * time.Millisecond})
	addr, _ := b.MustServe(t)
	conn, r := MustGreet(t, addr)
	stop := make(chan struct{})
	defer close(stop)
	go func() { // a byte now and then for ten seconds (many read timeouts), never a line end
		for _, c := range []byte("NOOP" + strings.Repeat(" ", 96)) {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := conn.Write([]byte{c}); err != nil {
				return
			}
		}
	}()
	lines := readUntilClosed(t, conn, r)
	// go-smtp's line reader hands the unfinished line on when the read times out, so it may be answered
	// once; then the connection must close.
	if len(lines) == 0 || len(lines) > 2 || !strings.HasPrefix(lines[len(lines)-1], "421 4.4.2") {
		t.Fatalf("replies %q: want at most one reply, then 421 4.4.2 and the connection closed", lines)
	}
}

// After a DATA transfer that stopped until the read timeout, nothing the client sends later is read as a
// command: the reply is 421 and the connection closes, so the rest of a stalled message can never become an
// SMTP transaction of its own.
func TestNothingIsReadAfterADataTimeout(t *testing.T) {
	t.Parallel()
	b := MustNewServerWith(t, smtpd.Config{ReadTimeout: 300 * time.Millisecond})
	addr, _ := b.MustServe(t)
	conn, r := MustGreet(t, addr)
	mustStartData(t, conn, r)
	if _, err := conn.Write([]byte("Subject: outer\r\n\r\nfirst part\r\n")); err != nil {
		t.Fatal(err)
	}
	// The client stalls; the server's read timeout passes and it answers the DATA.
	if err := conn.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	first, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(first, "421 4.4.2") {
		t.Fatalf("reply to the stalled DATA %q (%v): want 421 4.4.2", first, err)
	}
	// What a stalled relay would send next: the rest of the body, which carries a transaction of its own.
	_, _ = conn.Write([]byte("MAIL FROM:<x@example.org>\r\nRCPT TO:<y@example.net>\r\nDATA\r\nSubject: smuggled\r\n\r\nhi\r\n.\r\n"))
	lines := readUntilClosed(t, conn, r)
	for _, l := range lines {
		if strings.HasPrefix(l, "250") || strings.HasPrefix(l, "354") {
			t.Fatalf("replies after the stall %q: a later line was taken as a command", lines)
		}
	}
}

// A message line over the limit is refused for good (500): a temporary reply would have the sender retry
// a message that can never be taken, for days.
func TestOverlongDataLineIsRefusedForGood(t *testing.T) {
	t.Parallel()
	b := MustNewServerWith(t, smtpd.Config{})
	addr, _ := b.MustServe(t)
	conn, r := MustGreet(t, addr)
	mustStartData(t, conn, r)
	_, _ = conn.Write([]byte("Subject: long\r\n\r\n" + strings.Repeat("a", 5000) + "\r\n.\r\n"))
	lines := readUntilClosed(t, conn, r)
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "5") {
		t.Fatalf("replies %q: want a permanent refusal first", lines)
	}
}
