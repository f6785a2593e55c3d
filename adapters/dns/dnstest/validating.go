package dnstest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
)

// Validating is real DNSSEC end to end on loopback: a zone signed with ldns-signzone (keys from
// ldns-keygen), served by NSD as its authoritative server, and Unbound as a validating recursive resolver
// whose only trust anchor is the zone's key-signing key and which reaches the zone through a stub on
// loopback. Unbound sets the AD bit only on answers whose signatures it checked, and answers SERVFAIL for
// bogus data, so the code under test gets the AD bit from a validator and not from a test double.
// Unbound refuses every name outside the zone, so nothing is asked of any server off the host.
type Validating struct {
	// Resolver is Unbound's address (host:port, UDP and TCP): point the code under test at it.
	Resolver string
	// Authority is NSD's address: it answers for the zone without validating anything and sets no AD bit.
	Authority string
}

// The Debian packages providing the programs: ldnsutils, nsd, unbound (deploy/scripts/test-deps.sh).
var validatingPrograms = []struct{ name, pkg string }{
	{"ldns-keygen", "ldnsutils"}, {"ldns-signzone", "ldnsutils"}, {"nsd", "nsd"}, {"unbound", "unbound"},
}

// NewValidating signs the zone origin holding records (zone file lines, names relative to origin; the SOA,
// the NS and the name server's address are added), serves it and starts the resolver, all stopped when the
// test ends. The signatures of the records at each name in bogus (relative to origin) are corrupted after
// signing, as an attacker rewriting answers would leave them: Unbound finds them bogus.
//
// Without the programs the test is skipped with the reason, except when CI is "true": there a missing
// program fails the test.
func NewValidating(tb testing.TB, origin string, records []string, bogus ...string) *Validating {
	tb.Helper()
	origin = strings.TrimSuffix(strings.ToLower(origin), ".")
	paths := map[string]string{}
	for _, p := range validatingPrograms {
		path, err := lookProgram(p.name)
		if err != nil {
			msg := fmt.Sprintf("no %s (Debian package %s; deploy/scripts/test-deps.sh installs it)", p.name, p.pkg)
			if os.Getenv("CI") == "true" {
				tb.Fatal(msg + " and CI is \"true\"")
			}
			tb.Skip(msg)
		}
		paths[p.name] = path
	}
	dir := tb.TempDir()

	var zone strings.Builder
	fmt.Fprintf(&zone, "$ORIGIN %s.\n$TTL 300\n", origin)
	fmt.Fprintf(&zone, "@ IN SOA ns.%s. hostmaster.%s. 1 3600 600 86400 300\n@ IN NS ns.%s.\nns IN A 127.0.0.1\n", origin, origin, origin)
	for _, r := range records {
		zone.WriteString(r + "\n")
	}
	zoneFile := filepath.Join(dir, origin+".zone")
	if err := os.WriteFile(zoneFile, []byte(zone.String()), 0o600); err != nil {
		tb.Fatal(err)
	}
	ksk := strings.TrimSpace(run(tb, dir, paths["ldns-keygen"], "-a", "ECDSAP256SHA256", "-k", origin))
	zsk := strings.TrimSpace(run(tb, dir, paths["ldns-keygen"], "-a", "ECDSAP256SHA256", origin))
	run(tb, dir, paths["ldns-signzone"], zoneFile, ksk, zsk)
	signed := zoneFile + ".signed"
	if len(bogus) > 0 {
		corrupt(tb, signed, origin, bogus)
	}

	nsdPort := freePort(tb)
	nsdConf := fmt.Sprintf(`server:
	ip-address: 127.0.0.1@%[2]d
	port: %[2]d
	do-ip6: no
	username: ""
	chroot: ""
	zonesdir: %[1]q
	database: ""
	zonelistfile: "%[1]s/zone.list"
	xfrdfile: "%[1]s/xfrd.state"
	xfrdir: %[1]q
	pidfile: "%[1]s/nsd.pid"
	server-count: 1
	verbosity: 1
remote-control:
	control-enable: no
zone:
	name: %[3]s
	zonefile: %[4]q
`, dir, nsdPort, origin, signed)
	authority := net.JoinHostPort("127.0.0.1", strconv.Itoa(nsdPort))
	start(tb, dir, "nsd", paths["nsd"], nsdConf, "-d", "-c")
	waitAnswer(tb, authority, origin, false)

	unboundPort := freePort(tb)
	unboundConf := fmt.Sprintf(`server:
	interface: 127.0.0.1@%[2]d
	port: %[2]d
	do-ip6: no
	do-daemonize: no
	username: ""
	chroot: ""
	directory: %[1]q
	pidfile: "%[1]s/unbound.pid"
	use-syslog: no
	logfile: ""
	verbosity: 1
	val-log-level: 2
	access-control: 127.0.0.0/8 allow
	do-not-query-localhost: no
	module-config: "validator iterator"
	trust-anchor-file: %[3]q
	harden-dnssec-stripped: yes
	local-zone: "." refuse
	local-zone: "%[4]s." transparent
stub-zone:
	name: "%[4]s."
	stub-addr: 127.0.0.1@%[5]d
remote-control:
	control-enable: no
`, dir, unboundPort, filepath.Join(dir, ksk+".ds"), origin, nsdPort)
	resolver := net.JoinHostPort("127.0.0.1", strconv.Itoa(unboundPort))
	start(tb, dir, "unbound", paths["unbound"], unboundConf, "-d", "-c")
	waitAnswer(tb, resolver, origin, true)
	return &Validating{Resolver: resolver, Authority: authority}
}

// lookProgram finds name on PATH or where Debian installs daemons.
func lookProgram(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/usr/bin"} {
		p := filepath.Join(d, name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// run runs a program in dir and returns its standard output.
func run(tb testing.TB, dir, prog string, args ...string) string {
	tb.Helper()
	cmd := exec.Command(prog, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("%s %s: %v\n%s", filepath.Base(prog), strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// corrupt flips a byte in the middle of every RRSIG at the given names, except those over NSEC records.
func corrupt(tb testing.TB, signed, origin string, names []string) {
	tb.Helper()
	raw, err := os.ReadFile(signed)
	if err != nil {
		tb.Fatal(err)
	}
	want := map[string]bool{}
	for _, n := range names {
		want[strings.ToLower(n)+"."+origin+"."] = true
	}
	lines := strings.Split(string(raw), "\n")
	done := 0
	for i, line := range lines {
		f := strings.Fields(line)
		if len(f) < 6 || !want[strings.ToLower(f[0])] || f[3] != "RRSIG" || f[4] == "NSEC" {
			continue
		}
		sig := []byte(f[len(f)-1])
		mid := len(sig) / 2
		if sig[mid] == 'A' {
			sig[mid] = 'B'
		} else {
			sig[mid] = 'A'
		}
		f[len(f)-1] = string(sig)
		lines[i] = strings.Join(f, "\t")
		done++
	}
	if done == 0 {
		tb.Fatalf("no signature found to corrupt at %v", names)
	}
	if err := os.WriteFile(signed, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		tb.Fatal(err)
	}
}

// start writes conf and runs prog in the foreground with args and the configuration's path, until the test
// ends; its output goes to the test log when the test fails.
func start(tb testing.TB, dir, name, prog, conf string, args ...string) {
	tb.Helper()
	path := filepath.Join(dir, name+".conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(prog, append(args, path)...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		tb.Fatalf("starting %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if tb.Failed() {
			tb.Logf("%s output:\n%s", name, out.String())
		}
	})
}

// waitAnswer asks server for origin's SOA until it answers NOERROR (with the AD bit when validated), for at
// most 30 seconds (a busy machine starts the daemons slowly).
func waitAnswer(tb testing.TB, server, origin string, validated bool) {
	tb.Helper()
	c := &mdns.Client{Net: "udp", Timeout: 500 * time.Millisecond}
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		m := new(mdns.Msg)
		m.SetQuestion(origin+".", mdns.TypeSOA)
		m.SetEdns0(1232, true)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, _, err := c.ExchangeContext(ctx, m, server)
		cancel()
		switch {
		case err != nil:
			last = err.Error()
		case resp.Rcode != mdns.RcodeSuccess:
			last = mdns.RcodeToString[resp.Rcode]
		case validated && !resp.AuthenticatedData:
			tb.Fatalf("%s answered for %s without the AD bit: the zone did not validate", server, origin)
		default:
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	tb.Fatalf("%s did not answer for %s within 30 seconds: %s", server, origin, last)
}

// freePort returns a port free on 127.0.0.1 for both UDP and TCP at the time of the call.
func freePort(tb testing.TB) int {
	tb.Helper()
	for range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		pc, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		ln.Close()
		if err != nil {
			continue
		}
		pc.Close()
		return port
	}
	tb.Fatal("no port free for both UDP and TCP")
	return 0
}
