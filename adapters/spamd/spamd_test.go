package spamd_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/spamd"
	"github.com/postmill/postmill/ports"
)

// startSpamd runs a private spamd on a free loopback port with one rule of the test's own (a Subject
// containing postmill-spam-test scores 100) and no network tests, and stops it when the test ends. Without
// Debian's spamd the test is skipped, unless CI is "true".
func startSpamd(t *testing.T) string {
	t.Helper()
	bin := "/usr/sbin/spamd"
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("spamd is not installed and CI is \"true\"")
		}
		t.Skip("spamd is not installed (Debian's spamd package)")
	}
	// spamd drops to nobody when started as root: the directory it reads must be reachable by anyone, which
	// t.TempDir's parent is not.
	dir, err := os.MkdirTemp("", "postmill-spamd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	rules, site := filepath.Join(dir, "rules"), filepath.Join(dir, "site")
	for _, d := range []string{rules, site} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_ = os.Chmod(dir, 0o755)
	pres, _ := filepath.Glob("/etc/spamassassin/*.pre")
	for _, p := range pres {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(site, filepath.Base(p)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(rules, "postmill.cf"), []byte("header POSTMILL_TEST Subject =~ /postmill-spam-test/\nscore POSTMILL_TEST 100\nrequired_score 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "--listen="+addr, "--configpath="+rules, "--siteconfigpath="+site, "--local", "--nouser-config",
		"--max-children=2", "--syslog=stderr")
	out, _ := os.Create(filepath.Join(dir, "log"))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			t.Logf("spamd log:\n%s", log)
		}
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			t.Fatalf("spamd did not listen within 30s:\n%s", log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCheck: spamd's verdict and score come back; an oversized message passes unchecked; a dead spamd is an
// error, not a verdict.
func TestCheck(t *testing.T) {
	t.Parallel()
	c, err := spamd.New(spamd.Config{Addr: startSpamd(t), MaxBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	msg := func(subject string, pad int) []byte {
		return fmt.Appendf(nil, "From: a@sender.test\r\nTo: b@inbound.test\r\nSubject: %s\r\n\r\nhello%s\r\n", subject, make([]byte, pad))
	}
	for _, tc := range []struct {
		name string
		raw  []byte
		want string
	}{
		{"spam", msg("buy now postmill-spam-test", 0), ports.SpamSpam},
		{"ham", msg("lunch", 0), ports.SpamHam},
		{"oversized spam passes unchecked", msg("postmill-spam-test", 5000), ports.SpamHam},
	} {
		v, err := c.Check(context.Background(), tc.raw)
		if err != nil || v.Status != tc.want {
			t.Errorf("%s: %+v, %v; want %s", tc.name, v, err, tc.want)
		}
		if tc.name == "spam" && v.Score < 100 {
			t.Errorf("spam score %v, want at least 100", v.Score)
		}
	}
	dead, _ := spamd.New(spamd.Config{Addr: "127.0.0.1:1", Timeout: time.Second})
	if _, err := dead.Check(context.Background(), msg("x", 0)); err == nil {
		t.Error("a spamd that does not answer gave a verdict")
	}
	if _, err := spamd.New(spamd.Config{Addr: "nohost"}); err == nil {
		t.Error("an address without a port was accepted")
	}
}
