// Package stripemock starts Stripe's own stripe-mock (github.com/stripe/stripe-mock) for tests: a private
// process on free loopback ports, stopped when the test ends. stripe-mock validates every request against
// Stripe's OpenAPI specification and answers fixture-shaped objects; it keeps no state, so a created
// session cannot be read back and no webhook is ever sent by it.
package stripemock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// Version is the stripe-mock release the tests build from the module proxy.
const Version = "v0.203.0"

const module = "github.com/stripe/stripe-mock"

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Binary returns the path of the stripe-mock binary, building it once with `go install module@Version` into
// the user cache directory when it is not there yet (about a minute on a fresh machine). POSTMILL_STRIPE_MOCK
// names a binary to use instead.
func Binary() (string, error) {
	if p := os.Getenv("POSTMILL_STRIPE_MOCK"); p != "" {
		return p, nil
	}
	buildOnce.Do(func() { buildPath, buildErr = build() })
	return buildPath, buildErr
}

func build() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "postmill", "stripe-mock-"+Version)
	bin := filepath.Join(dir, "stripe-mock")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", errors.New("the go command is not on PATH")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Build into a directory of its own and rename, so that test binaries building at once never run a
	// half-written file.
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "install", module+"@"+Version)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s@%s: %v\n%s", module, Version, err, out)
	}
	if err := os.Rename(filepath.Join(tmp, "stripe-mock"), bin); err != nil {
		return "", err
	}
	return bin, nil
}

var listening = regexp.MustCompile(`Listening for HTTP at address: (127\.0\.0\.1:[0-9]+)`)

// Start runs stripe-mock on free loopback ports (HTTP and HTTPS both bound to 127.0.0.1) and returns its
// HTTP base URL. When the binary cannot be built the test is skipped with the reason, unless CI is "true".
func Start(t testing.TB) string {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("stripe-mock cannot be built: %v", err)
		}
		t.Skipf("stripe-mock cannot be built (needs the go command and the module proxy): %v", err)
	}
	cmd := exec.Command(bin, "-http-addr", "127.0.0.1:0", "-https-addr", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var logMu sync.Mutex
	var log strings.Builder
	cmd.Stderr = writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return log.Write(p)
	})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			logMu.Lock()
			t.Logf("stripe-mock output:\n%s", log.String())
			logMu.Unlock()
		}
	})
	addr := make(chan string, 1)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		found := false
		for sc.Scan() {
			line := sc.Text()
			logMu.Lock()
			log.WriteString(line + "\n")
			logMu.Unlock()
			if m := listening.FindStringSubmatch(line); m != nil && !found {
				found = true
				addr <- m[1]
			}
		}
		_ = cmd.Wait()
	}()
	select {
	case a := <-addr:
		return "http://" + a
	case <-done:
		logMu.Lock()
		defer logMu.Unlock()
		t.Fatalf("stripe-mock exited before listening:\n%s", log.String())
	case <-time.After(60 * time.Second):
		logMu.Lock()
		defer logMu.Unlock()
		t.Fatalf("stripe-mock did not listen within 60s:\n%s", log.String())
	}
	return ""
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
