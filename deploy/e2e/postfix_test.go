package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/smtp"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// postfixConfig is what a private Postfix is told about the world around it.
type postfixConfig struct {
	// Addr is the host:port its SMTP server listens on. Empty picks a free port on 127.0.0.1 just before
	// starting; a caller that must know the address earlier (to hand it to Postmill as its relay) reserves
	// one with freeAddr.
	Addr string
	// Transports routes recipient domains: domain → Postfix next hop, e.g. smtpNexthop(sink.addr). Nothing
	// else is routable: there is no DNS and no local delivery.
	Transports map[string]string
	// LogSessions logs every SMTP session with loopback peers line by line (debug_peer_list), so that a
	// test can read which commands a client sent.
	LogSessions bool
}

// postfix is a private Postfix instance: its own configuration, queue and data directories, its SMTP
// server on loopback, and its log in a file the test reads. It stands in for "a real MTA on the internet":
// it relays what Postmill hands it, and it writes the delivery status notifications (RFC 3464) of a real
// mail system when the next hop refuses.
type postfix struct {
	addr    string
	root    string
	confDir string
	maillog string
}

// postfixBinary is where Debian's postfix package puts the control command.
const postfixBinary = "/usr/sbin/postfix"

// MustPostfix starts a private Postfix for cfg and stops it when the test ends. When Postfix is not
// installed the test is skipped, unless CI=true: deploy/scripts/test-deps.sh installs it, so a CI run
// without it is broken. Starting it needs root (its daemons drop to the postfix user).
func MustPostfix(tb testing.TB, cfg postfixConfig) *postfix {
	tb.Helper()
	bin := postfixBinary
	if _, err := os.Stat(bin); err != nil {
		if p, lerr := exec.LookPath("postfix"); lerr == nil {
			bin = p
		} else {
			missingEngine(tb, "postfix is not installed (deploy/scripts/test-deps.sh installs it)")
		}
	}
	if os.Geteuid() != 0 {
		missingEngine(tb, "a private Postfix needs root to start")
	}
	owner, err := user.Lookup("postfix")
	if err != nil {
		missingEngine(tb, fmt.Sprintf("no postfix user: %v", err))
	}
	master, err := os.ReadFile("/etc/postfix/master.cf")
	if err != nil {
		missingEngine(tb, fmt.Sprintf("Debian's master.cf is missing: %v", err))
	}

	// Not t.TempDir: its directories are private to root (0700), and Postfix's daemons run as the postfix
	// user inside the queue and data directories.
	root, err := os.MkdirTemp("", "postmill-postfix-")
	if err != nil {
		tb.Fatal(err)
	}
	p := &postfix{root: root, confDir: filepath.Join(root, "conf"), maillog: filepath.Join(root, "maillog")}
	tb.Cleanup(func() { _ = os.RemoveAll(root) })
	uid, _ := strconv.Atoi(owner.Uid)
	gid, _ := strconv.Atoi(owner.Gid)
	if err := os.Chmod(root, 0o755); err != nil {
		tb.Fatal(err)
	}
	for _, dir := range []string{"conf", "queue", "data"} {
		if err := os.Mkdir(filepath.Join(root, dir), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	// The data directory holds master.lock and the TLS caches, written by the unprivileged daemons.
	if err := os.Chown(filepath.Join(root, "data"), uid, gid); err != nil {
		tb.Fatal(err)
	}

	if err := os.WriteFile(filepath.Join(p.confDir, "main.cf"), []byte(p.mainCF(cfg)), 0o644); err != nil {
		tb.Fatal(err)
	}
	// A port picked here is free when picked, not when the master binds it: a test starting beside this
	// one may take it meanwhile. Then the master fails with "Address already in use" and another port is
	// tried (a port the caller reserved is the caller's to keep).
	for attempt := 1; ; attempt++ {
		p.addr = cfg.Addr
		if p.addr == "" {
			p.addr = freeAddr(tb)
		}
		if _, _, err := net.SplitHostPort(p.addr); err != nil {
			tb.Fatalf("postfix address %q: %v", p.addr, err)
		}
		if err := os.WriteFile(filepath.Join(p.confDir, "master.cf"), masterCF(master, p.addr), 0o644); err != nil {
			tb.Fatal(err)
		}
		out, err := exec.Command(bin, "-c", p.confDir, "start").CombinedOutput()
		if err == nil {
			break
		}
		if cfg.Addr == "" && attempt < 3 && strings.Contains(p.log(), "Address already in use") {
			continue
		}
		check, _ := exec.Command(bin, "-c", p.confDir, "check").CombinedOutput()
		tb.Fatalf("postfix start: %v\n%s\npostfix check:\n%s\nmaillog:\n%s", err, out, check, p.log())
	}
	tb.Cleanup(func() {
		out, err := exec.Command(bin, "-c", p.confDir, "stop").CombinedOutput()
		if err != nil {
			// stop waits a few seconds for the master to exit; abort does not wait for in-flight work.
			if aout, aerr := exec.Command(bin, "-c", p.confDir, "abort").CombinedOutput(); aerr != nil {
				tb.Errorf("postfix stop: %v %s; abort: %v %s", err, out, aerr, aout)
			}
		}
	})

	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", p.addr, time.Second)
		if err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("postfix does not accept connections on %s: %v\nmaillog:\n%s", p.addr, err, p.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return p
}

// missingEngine skips the test when an engine it needs cannot run here, or fails it when CI=true: CI
// installs every engine, so there a missing one is a broken setup, not a reason to pass.
func missingEngine(tb testing.TB, why string) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf("%s; CI must run this test", why)
	}
	tb.Skip(why)
}

// mainCF is the instance's main.cf. Everything that reaches for the machine (DNS, /etc/aliases, the
// system log, local mailboxes) is switched off, and the queue timers are short so that a bounce is
// reported at once and a deferred message is retried within a second or two.
func (p *postfix) mainCF(cfg postfixConfig) string {
	transports := cfg.Transports
	domains := make([]string, 0, len(transports))
	for d := range transports {
		domains = append(domains, d)
	}
	sort.Strings(domains)
	entries := make([]string, 0, len(domains))
	for _, d := range domains {
		entries = append(entries, d+"="+transports[d])
	}
	transportMaps := ""
	if len(entries) > 0 {
		transportMaps = "inline:{ " + strings.Join(entries, ", ") + " }"
	}
	lines := []string{
		"compatibility_level = 3.6",
		"myhostname = postfix.test",
		"mydomain = postfix.test",
		"myorigin = $myhostname",
		// No local domains: every recipient is relayed by transport_maps or refused as unroutable.
		"mydestination =",
		"local_recipient_maps =",
		"alias_maps =",
		"alias_database =",
		"inet_interfaces = 127.0.0.1",
		"inet_protocols = ipv4",
		// Postmill's MTA connects from loopback and may relay anywhere (smtpd_relay_restrictions'
		// permit_mynetworks).
		"mynetworks = 127.0.0.0/8",
		"queue_directory = " + filepath.Join(p.root, "queue"),
		"data_directory = " + filepath.Join(p.root, "data"),
		"maillog_file = " + p.maillog,
		"maillog_file_prefixes = " + p.root,
		"transport_maps = " + transportMaps,
		// Any other domain is refused on the spot instead of being looked up: no traffic leaves loopback.
		"default_transport = error:no route outside the test's transport map",
		// Next hops are bracketed IP literals; nothing is looked up in DNS (client names included).
		"smtp_host_lookup = native",
		"smtp_dns_support_level = disabled",
		"smtpd_peername_lookup = no",
		"smtputf8_enable = no",
		"biff = no",
		"append_dot_mydomain = no",
		"queue_run_delay = 1s",
		"minimal_backoff_time = 1s",
		"maximal_backoff_time = 2s",
		// A notification the next hop refuses for now is retried for a minute, not for days.
		"bounce_queue_lifetime = 1m",
		"maximal_queue_lifetime = 10m",
		"delay_warning_time = 0",
		"in_flow_delay = 0",
	}
	if cfg.LogSessions {
		lines = append(lines, "debug_peer_list = 127.0.0.1", "debug_peer_level = 1")
	}
	return strings.Join(lines, "\n") + "\n"
}

// masterCF derives the instance's master.cf from Debian's: no chroot (the queue is not prepared as a jail),
// and the SMTP server on listen instead of port 25 on every interface. The postlog service it already has
// writes maillog_file.
func masterCF(debian []byte, listen string) []byte {
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(debian))
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if strings.HasPrefix(line, "#") || len(f) < 8 || line[0] == ' ' || line[0] == '\t' {
			out.WriteString(line + "\n")
			continue
		}
		if f[0] == "smtp" && f[1] == "inet" {
			f[0] = listen
		}
		f[4] = "n" // chroot
		out.WriteString(strings.Join(f, "  ") + "\n")
	}
	return out.Bytes()
}

// log is the instance's maillog so far: the first thing to read when a test through Postfix fails.
func (p *postfix) log() string {
	b, err := os.ReadFile(p.maillog)
	if err != nil {
		return fmt.Sprintf("(no maillog: %v)", err)
	}
	return string(b)
}

// waitLog polls the maillog until a line contains every one of needles, and returns that line.
func (p *postfix) waitLog(tb testing.TB, timeout time.Duration, needles ...string) string {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, line := range strings.Split(p.log(), "\n") {
			all := true
			for _, n := range needles {
				all = all && strings.Contains(line, n)
			}
			if all {
				return line
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("postfix never logged a line with %q\nmaillog:\n%s", needles, p.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// smtpNexthop is a transport_maps value delivering over SMTP to addr (host:port) without any DNS lookup:
// the brackets turn off MX resolution (postconf(5), transport(5)).
func smtpNexthop(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	return "smtp:[" + host + "]:" + port
}

// freeAddr returns a loopback address with a port nothing listens on right now. Another process may take
// the port before the caller binds it; callers bind it soon after.
func freeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// TestPostfixHarness checks the instance itself, without Postmill: it relays to the recipient's MX, and
// when that MX refuses a recipient it sends the sender a delivery status notification of the shape
// Postmill's MX listener is tested against (RFC 3464 §2; RFC 3462 multipart/report), with a null
// envelope sender (RFC 5321 §4.5.5) to the return path, for that recipient only; a domain it has no route
// for is refused without leaving loopback.
func TestPostfixHarness(t *testing.T) {
	t.Parallel()
	mx := MustSink(t, "127.0.0.1", "0")
	returnPath := MustSink(t, "127.0.0.1", "0")
	mx.setReject("gone@rcpt.example")
	pf := MustPostfix(t, postfixConfig{Transports: map[string]string{
		"rcpt.example":          smtpNexthop(mx.addr),
		"bounce.sender.example": smtpNexthop(returnPath.addr),
	}})
	msg := "From: a@sender.example\r\nTo: gone@rcpt.example, kept@rcpt.example\r\nSubject: harness\r\n" +
		"Message-ID: <harness@sender.example>\r\n\r\nbody\r\n"
	if err := smtp.SendMail(pf.addr, nil, "b-token@bounce.sender.example", []string{"gone@rcpt.example", "kept@rcpt.example"}, []byte(msg)); err != nil {
		t.Fatalf("relaying through postfix: %v\n%s", err, pf.log())
	}
	if got := mx.waitFor(t, "Subject: harness", 10*time.Second); len(got.to) != 1 || got.to[0] != "kept@rcpt.example" {
		t.Errorf("relayed to %v, want only kept@rcpt.example", got.to)
	}
	dsn := returnPath.waitFor(t, "Subject: harness", 10*time.Second)
	if dsn.from != "" || len(dsn.to) != 1 || dsn.to[0] != "b-token@bounce.sender.example" {
		t.Errorf("DSN envelope from %q to %v, want <> to the return path", dsn.from, dsn.to)
	}
	data := string(dsn.data)
	for _, want := range []string{
		"Content-Type: multipart/report; report-type=delivery-status;",
		"Content-Type: message/delivery-status",
		"Reporting-MTA: dns; postfix.test",
		"Final-Recipient: rfc822; gone@rcpt.example",
		"Action: failed",
		"Status: 5.1.1",
		"Remote-MTA: dns; 127.0.0.1",
		"Diagnostic-Code: smtp; 550 5.1.1 <gone@rcpt.example>",
		"Content-Type: message/rfc822",
		"Message-ID: <harness@sender.example>",
	} {
		if !strings.Contains(data, want) {
			t.Errorf("DSN lacks %q:\n%s", want, data)
		}
	}
	if strings.Contains(data, "Final-Recipient: rfc822; kept@rcpt.example") {
		t.Errorf("DSN reports the delivered recipient:\n%s", data)
	}
	pf.waitLog(t, 5*time.Second, "to=<b-token@bounce.sender.example>", "status=sent")

	// A domain outside the transport map is refused at RCPT, without a lookup or a connection.
	err := smtp.SendMail(pf.addr, nil, "b-token@bounce.sender.example", []string{"lost@elsewhere.example"}, []byte(msg))
	if err == nil || !strings.Contains(err.Error(), "550") || !strings.Contains(err.Error(), "no route") {
		t.Errorf("relaying to an unrouted domain: %v, want 550 no route", err)
	}
}
