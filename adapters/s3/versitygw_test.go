package s3_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// versitygwVersion is the S3-compatible server the tests run (github.com/versity/versitygw, Apache-2.0). It
// is built once from the Go module proxy into a cache directory and reused by later runs.
const versitygwVersion = "v1.8.0"

// gateway is a running versitygw with its credentials.
type gateway struct {
	Endpoint  string // host:port
	AccessKey string
	SecretKey string
}

var (
	installOnce sync.Once
	installPath string
	installErr  error
	installOut  []byte
)

// goTool returns the go command that runs this test.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// versitygwBinary returns the pinned versitygw, building it on first use into
// $(go env GOCACHE)/postmill-tools/versitygw-<version>. On a machine without network access the test is
// skipped with the reason — unless CI is "true", where a missing engine must fail the build.
func versitygwBinary(tb testing.TB) string {
	tb.Helper()
	installOnce.Do(func() {
		out, err := exec.Command(goTool(), "env", "GOCACHE").Output()
		if err != nil {
			installErr = err
			return
		}
		dir := filepath.Join(strings.TrimSpace(string(out)), "postmill-tools", "versitygw-"+versitygwVersion)
		bin := filepath.Join(dir, "versitygw")
		if runtime.GOOS == "windows" {
			bin += ".exe"
		}
		if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
			installPath = bin
			return
		}
		cmd := exec.Command(goTool(), "install", "github.com/versity/versitygw/cmd/versitygw@"+versitygwVersion)
		cmd.Env = append(os.Environ(), "GOBIN="+dir)
		installOut, installErr = cmd.CombinedOutput()
		if installErr == nil {
			installPath = bin
		}
	})
	if installErr != nil {
		reason := "go install github.com/versity/versitygw/cmd/versitygw@" + versitygwVersion + ": " + installErr.Error() +
			"\n" + string(installOut)
		if offline(installOut) && os.Getenv("CI") != "true" {
			tb.Skipf("no S3 server: cannot build versitygw without network access (set CI=true to make this fatal): %s", reason)
		}
		tb.Fatalf("no S3 server: %s", reason)
	}
	return installPath
}

// offline recognises the go command's messages for a module proxy it cannot reach.
func offline(out []byte) bool {
	for _, s := range []string{
		"dial tcp", "no such host", "network is unreachable", "connection refused", "i/o timeout",
		"TLS handshake timeout", "proxyconnect", "temporary failure in name resolution",
	} {
		if bytes.Contains(bytes.ToLower(out), []byte(strings.ToLower(s))) {
			return true
		}
	}
	return false
}

// startGateway runs a private versitygw on a free loopback port with a posix backend in a temporary
// directory, waits until it answers HTTP, and stops it when tb ends.
func startGateway(tb testing.TB) gateway {
	tb.Helper()
	bin := versitygwBinary(tb)
	g := gateway{AccessKey: "postmill" + randomHex(tb, 4), SecretKey: randomHex(tb, 20)}
	var lastErr error
	for range 3 { // the free port can be taken between choosing it and the gateway binding it
		port, err := freePort()
		if err != nil {
			tb.Fatal(err)
		}
		g.Endpoint = net.JoinHostPort("127.0.0.1", port)
		if lastErr = runGateway(tb, bin, g); lastErr == nil {
			return g
		}
	}
	tb.Fatalf("versitygw did not start: %v", lastErr)
	return g
}

func runGateway(tb testing.TB, bin string, g gateway) error {
	tb.Helper()
	root := tb.TempDir()
	var logs lockedBuffer
	cmd := exec.Command(bin, "--quiet", "--port", g.Endpoint, "posix", root)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+g.AccessKey, "ROOT_SECRET_ACCESS_KEY="+g.SecretKey)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}

	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case err := <-exited:
			return errors.New("versitygw exited: " + errString(err) + "\n" + logs.String())
		default:
		}
		// Any HTTP answer (an S3 error for the anonymous request included) means it is serving.
		if resp, err := client.Get("http://" + g.Endpoint + "/"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			stop()
			return errors.New("versitygw did not answer within 20s\n" + logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	tb.Cleanup(func() {
		stop()
		if tb.Failed() {
			tb.Logf("versitygw output:\n%s", logs.String())
		}
	})
	return nil
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	return port, err
}

func randomHex(tb testing.TB, n int) string {
	tb.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func errString(err error) string {
	if err == nil {
		return "status 0"
	}
	return err.Error()
}

// lockedBuffer collects the gateway's output written from its own goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
