package mta

import (
	"io"
	"net"
	"testing"
)

func TestBareCode(t *testing.T) {
	for line, want := range map[string]bool{
		"250\r\n": true, "550\n": true, "250 \r\n": false, "250 ok\r\n": false, "2500\r\n": false,
		"25\r\n": false, "25x\r\n": false, "\r\n": false, "250": false,
	} {
		if got := bareCode([]byte(line)); got != want {
			t.Errorf("bareCode(%q) = %v, want %v", line, got, want)
		}
	}
}

// replyConn hands on one line per read, gives a bare code its space, and keeps what follows a line
// (pending) until it is read.
func TestReplyConnHandsOnLinesOneAtATime(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	go func() {
		_, _ = server.Write([]byte("250-first\r\n250\r\n354"))
		_, _ = server.Write([]byte(" go\r\n"))
		_ = server.Close()
	}()
	rc := newReplyConn(client)
	buf := make([]byte, 100)
	var lines []string
	for {
		n, err := rc.Read(buf)
		if n > 0 {
			lines = append(lines, string(buf[:n]))
			if len(lines) == 1 && !rc.pending() {
				t.Error("the lines after the first are not held")
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"250-first\r\n", "250 \r\n", "354 go\r\n"}
	if len(lines) != len(want) {
		t.Fatalf("lines %q, want %q", lines, want)
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d = %q, want %q", i, lines[i], want[i])
		}
	}
	if rc.pending() {
		t.Error("pending after everything was read")
	}
}
