// Package spamdtest starts a private SpamAssassin spamd for tests: one rule of its own, no network tests,
// a free loopback port, stopped when the test ends.
package spamdtest

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Start runs a private spamd on a free loopback port with one rule of the test's own (a Subject
// containing postmill-spam-test scores 100) and no network tests, and stops it when the test ends. Without
// Debian's spamd the test is skipped, unless CI is "true".
func Start(t testing.TB) string {
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
