package clamd_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postmill/postmill/adapters/clamd"
)

const (
	eicar = `X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*`
	// eicarHDB is a ClamAV hash signature (MD5:size:name) of the 68-byte EICAR file: the tests need no
	// downloaded database, and clamd refuses to start with an empty one.
	eicarHDB        = "44d88612fea8a8f36de82e1278abb02f:68:Eicar-Test-Signature\n"
	streamMaxLength = 4 << 20
)

// clamdBinary finds the daemon Debian's clamav-daemon installs. Without it the test is skipped with the
// reason, except when CI is "true": there a missing engine must fail, not pass silently.
func clamdBinary(tb testing.TB) string {
	tb.Helper()
	const debian = "/usr/sbin/clamd"
	if _, err := os.Stat(debian); err == nil {
		return debian
	}
	if p, err := exec.LookPath("clamd"); err == nil {
		return p
	}
	if os.Getenv("CI") != "true" {
		tb.Skip("no ClamAV daemon: " + debian + " is missing (install clamav-daemon, e.g. deploy/scripts/test-deps.sh)")
	}
	tb.Fatal("no ClamAV daemon: " + debian + " is missing and CI is \"true\"")
	return ""
}

var (
	daemonOnce sync.Once
	daemonAddr string
	daemonErr  error
	daemonLogs string
	daemonStop func()
)

// TestMain stops the one clamd the package's tests share.
func TestMain(m *testing.M) {
	code := m.Run()
	if daemonStop != nil {
		daemonStop()
	}
	os.Exit(code)
}

// startClamd returns the address of a private clamd on a free loopback port with a one-signature
// database, starting it on first use.
func startClamd(tb testing.TB) string {
	tb.Helper()
	bin := clamdBinary(tb)
	daemonOnce.Do(func() {
		for range 3 { // the free port can be taken between choosing it and clamd binding it
			daemonAddr, daemonStop, daemonLogs, daemonErr = runClamd(bin)
			if daemonErr == nil {
				return
			}
		}
	})
	if daemonErr != nil {
		tb.Fatalf("clamd did not start: %v\n%s", daemonErr, daemonLogs)
	}
	return daemonAddr
}

func runClamd(bin string) (addr string, stop func(), logs string, err error) {
	dir, err := os.MkdirTemp("", "postmill-clamd-")
	if err != nil {
		return "", nil, "", err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	for _, d := range []string{"db", "tmp"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			cleanup()
			return "", nil, "", err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "db", "test.hdb"), []byte(eicarHDB), 0o600); err != nil {
		cleanup()
		return "", nil, "", err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cleanup()
		return "", nil, "", err
	}
	addr = l.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	l.Close()
	logFile := filepath.Join(dir, "clamd.log")
	conf := filepath.Join(dir, "clamd.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, `Foreground yes
TCPSocket %s
TCPAddr 127.0.0.1
DatabaseDirectory %s
TemporaryDirectory %s
LogFile %s
StreamMaxLength %d
`, port, filepath.Join(dir, "db"), filepath.Join(dir, "tmp"), logFile, streamMaxLength), 0o600); err != nil {
		cleanup()
		return "", nil, "", err
	}

	var out bytes.Buffer
	cmd := exec.Command(bin, "--config-file="+conf)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		cleanup()
		return "", nil, "", err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop = func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		cleanup()
	}
	readLogs := func() string {
		b, _ := os.ReadFile(logFile)
		return out.String() + string(b)
	}

	s, err := clamd.New(clamd.Config{Addr: addr, Timeout: time.Second})
	if err != nil {
		stop()
		return "", nil, "", err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-exited:
			logs := readLogs()
			cleanup()
			return "", nil, logs, fmt.Errorf("clamd exited: %v", err)
		default:
		}
		if s.Ping(context.Background()) == nil {
			return addr, stop, "", nil
		}
		if time.Now().After(deadline) {
			logs := readLogs()
			stop()
			return "", nil, logs, errors.New("clamd did not answer PING within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func newScanner(tb testing.TB, cfg clamd.Config) *clamd.Scanner {
	tb.Helper()
	s, err := clamd.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// noise is deterministic content that matches no signature and does not compress into one chunk.
func noise(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func TestScan(t *testing.T) {
	t.Parallel()
	addr := startClamd(t)
	for _, tc := range []struct {
		name      string
		chunkSize int
		data      []byte
		wantClean bool
		wantSig   string // substring
	}{
		{"clean text", 0, []byte("Hello, this is an ordinary attachment.\r\n"), true, ""},
		{"empty", 0, nil, true, ""},
		{"eicar", 0, []byte(eicar), false, "Eicar-Test-Signature"},
		// clamd must reassemble the file from five chunks to match its hash.
		{"eicar in 16-byte chunks", 16, []byte(eicar), false, "Eicar-Test-Signature"},
		// 3 MiB in 48 chunks of the default size.
		{"large clean in many chunks", 0, noise(3 << 20), true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newScanner(t, clamd.Config{Addr: addr, ChunkSize: tc.chunkSize})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			v, err := s.Scan(ctx, "file.bin", "application/octet-stream", tc.data)
			if err != nil {
				t.Fatalf("Scan: %v", err)
			}
			if v.Clean != tc.wantClean || !strings.Contains(v.Signature, tc.wantSig) || (tc.wantClean && v.Signature != "") {
				t.Fatalf("Scan = %+v, want clean %t with signature containing %q", v, tc.wantClean, tc.wantSig)
			}
		})
	}
}

// TestScanFailsClosed: what clamd refuses to judge, and a clamd that is not there, are errors — never a
// clean verdict.
func TestScanFailsClosed(t *testing.T) {
	t.Parallel()
	addr := startClamd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	v, err := newScanner(t, clamd.Config{Addr: addr}).Scan(ctx, "big.bin", "", noise(streamMaxLength+1<<20))
	if err == nil || !strings.Contains(err.Error(), "size limit") {
		t.Fatalf("Scan beyond StreamMaxLength = (%+v, %v), want clamd's size limit error", v, err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	if v, err := newScanner(t, clamd.Config{Addr: closed}).Scan(ctx, "a", "", []byte("x")); err == nil {
		t.Fatalf("Scan against a closed port = %+v, want an error", v)
	}
}

// TestScanHonoursTimeoutAndContext uses a listener that accepts and never answers, as a hung daemon would.
func TestScanHonoursTimeoutAndContext(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never read: a hung daemon
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})

	start := time.Now()
	_, err = newScanner(t, clamd.Config{Addr: l.Addr().String(), Timeout: 200 * time.Millisecond}).
		Scan(context.Background(), "a", "", []byte("x"))
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("Scan against a silent peer = %v after %s, want a timeout error near 200ms", err, time.Since(start))
	}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err = newScanner(t, clamd.Config{Addr: l.Addr().String()}).Scan(ctx, "a", "", []byte("x"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Scan cancelled by its context = %v, want context.Canceled", err)
	}
}

func TestPing(t *testing.T) {
	t.Parallel()
	addr := startClamd(t)
	if err := newScanner(t, clamd.Config{Addr: addr}).Ping(context.Background()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, cfg := range []clamd.Config{{}, {Addr: "no-port"}, {Addr: "127.0.0.1:3310", Timeout: -1}} {
		if _, err := clamd.New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
	if _, err := clamd.New(clamd.Config{Addr: "127.0.0.1:3310"}); err != nil {
		t.Errorf("New with an address: %v", err)
	}
}
