package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// cdpBrowser drives headless Chromium over the DevTools protocol on a pipe (--remote-debugging-pipe:
// NUL-terminated JSON messages on file descriptors 3 and 4), so a test can press keys and read the page
// without a WebSocket client. The network is cut to loopback the way edge/docs_browser_test.go does it:
// every name but 127.0.0.1 fails to resolve.
type cdpBrowser struct {
	t       *testing.T
	cmd     *exec.Cmd
	w       *os.File
	mu      sync.Mutex
	nextID  int
	waiting map[int]chan cdpMessage
	events  chan cdpMessage
	session string
}

type cdpMessage struct {
	ID        int             `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    any             `json:"params,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Message string `json:"message"`
	} `json:"error,omitempty"`
	RawParams json.RawMessage `json:"-"`
}

// chromiumPathOrSkip finds the browser; a missing one skips the test, or fails it under CI=true where
// deploy/scripts/test-deps.sh installs it.
func chromiumPathOrSkip(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome-stable", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const why = "no chromium on PATH: deploy/scripts/test-deps.sh installs Debian's chromium"
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
	return ""
}

// newCDPBrowser starts Chromium and attaches to one blank page.
func newCDPBrowser(t *testing.T) *cdpBrowser {
	t.Helper()
	path := chromiumPathOrSkip(t)
	toChrome, chromeIn, err := os.Pipe() // Chromium reads fd 3
	if err != nil {
		t.Fatal(err)
	}
	chromeOut, fromChrome, err := os.Pipe() // Chromium writes fd 4
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, path, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--no-default-browser-check", "--disable-background-networking", "--disable-component-update",
		"--disable-sync", "--disable-extensions", "--mute-audio", "--user-data-dir="+t.TempDir(),
		"--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--remote-debugging-pipe", "about:blank")
	cmd.ExtraFiles = []*os.File{toChrome, fromChrome}
	// Chromium forks helpers (zygote, renderers) that outlive a killed browser process and go on writing
	// into the profile directory, which then cannot be removed: the whole process group is killed, and
	// the cleanup waits until none of it is left.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("chromium: %v", err)
	}
	_ = toChrome.Close()
	_ = fromChrome.Close()
	b := &cdpBrowser{t: t, cmd: cmd, w: chromeIn, waiting: map[int]chan cdpMessage{}, events: make(chan cdpMessage, 256)}
	t.Cleanup(func() {
		_ = chromeIn.Close()
		cancel()
		_ = cmd.Wait()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if err := syscall.Kill(-cmd.Process.Pid, 0); errors.Is(err, syscall.ESRCH) {
				return
			}
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
	go b.read(chromeOut)

	var target struct {
		TargetID string `json:"targetId"`
	}
	b.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target)
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	b.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached)
	b.session = attached.SessionID
	b.call(b.session, "Page.enable", nil, nil)
	b.call(b.session, "Runtime.enable", nil, nil)
	return b
}

func (b *cdpBrowser) read(r *os.File) {
	br := bufio.NewReader(r)
	for {
		raw, err := br.ReadBytes(0)
		if err != nil {
			return
		}
		var m cdpMessage
		var withParams struct {
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(raw[:len(raw)-1], &m) != nil {
			continue
		}
		_ = json.Unmarshal(raw[:len(raw)-1], &withParams)
		m.RawParams = withParams.Params
		if m.ID != 0 {
			b.mu.Lock()
			ch := b.waiting[m.ID]
			delete(b.waiting, m.ID)
			b.mu.Unlock()
			if ch != nil {
				ch <- m
			}
			continue
		}
		select {
		case b.events <- m:
		default: // nobody is waiting for old events
		}
	}
}

// call sends one command and decodes its result into out.
func (b *cdpBrowser) call(session, method string, params any, out any) {
	b.t.Helper()
	b.mu.Lock()
	b.nextID++
	id := b.nextID
	ch := make(chan cdpMessage, 1)
	b.waiting[id] = ch
	b.mu.Unlock()
	msg, err := json.Marshal(cdpMessage{ID: id, Method: method, Params: params, SessionID: session})
	if err != nil {
		b.t.Fatal(err)
	}
	if _, err := b.w.Write(append(msg, 0)); err != nil {
		b.t.Fatalf("cdp %s: %v", method, err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			b.t.Fatalf("cdp %s: %s", method, m.Error.Message)
		}
		if out != nil {
			if err := json.Unmarshal(m.Result, out); err != nil {
				b.t.Fatalf("cdp %s result: %v", method, err)
			}
		}
	case <-time.After(30 * time.Second):
		b.t.Fatalf("cdp %s: no answer", method)
	}
}

// drainEvents forgets the events seen so far.
func (b *cdpBrowser) drainEvents() {
	for {
		select {
		case <-b.events:
		default:
			return
		}
	}
}

// waitLoad waits for the page's load event.
func (b *cdpBrowser) waitLoad() {
	b.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case m := <-b.events:
			if m.Method == "Page.loadEventFired" {
				return
			}
		case <-deadline:
			b.t.Fatal("the page never finished loading")
		}
	}
}

// navigate opens url and waits for it to load.
func (b *cdpBrowser) navigate(url string) {
	b.t.Helper()
	b.drainEvents()
	b.call(b.session, "Page.navigate", map[string]any{"url": url}, nil)
	b.waitLoad()
}

// eval evaluates a JavaScript expression in the page (DevTools runs it; the page's own policy allows no
// script) and returns its value as a string.
func (b *cdpBrowser) eval(expr string) string {
	b.t.Helper()
	var r struct {
		Result struct {
			Value any `json:"value"`
		} `json:"result"`
	}
	b.call(b.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}, &r)
	return fmt.Sprint(r.Result.Value)
}

// key presses and releases one key as a keyboard would.
func (b *cdpBrowser) key(key, code string, vk int, text string) {
	b.t.Helper()
	down := map[string]any{"type": "keyDown", "key": key, "code": code, "windowsVirtualKeyCode": vk, "nativeVirtualKeyCode": vk}
	if text != "" {
		down["text"] = text
	}
	b.call(b.session, "Input.dispatchKeyEvent", down, nil)
	b.call(b.session, "Input.dispatchKeyEvent", map[string]any{"type": "keyUp", "key": key, "code": code, "windowsVirtualKeyCode": vk, "nativeVirtualKeyCode": vk}, nil)
}
