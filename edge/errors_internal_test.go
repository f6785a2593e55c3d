package edge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestFieldPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"body.attachments[0].content": "attachments.0.content",
		"body.to[12]":                 "to.12",
		"body":                        "",
		"body[3].email":               "3.email",
		"path.id":                     "id",
		"query.limit":                 "limit",
		"header.Idempotency-Key":      "Idempotency-Key",
		"bodyguard.x":                 "bodyguard.x",
		"tags.a":                      "tags.a",
	} {
		if got := fieldPath(in); got != want {
			t.Errorf("fieldPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRequiredProperty(t *testing.T) {
	t.Parallel()
	if name, ok := requiredProperty("expected required property email to be present"); !ok || name != "email" {
		t.Errorf("got %q %v", name, ok)
	}
	if _, ok := requiredProperty("expected length >= 1"); ok {
		t.Error("matched an unrelated message")
	}
}

func TestLooksLikeJWT(t *testing.T) {
	t.Parallel()
	for tok, want := range map[string]bool{
		"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln": true,
		"svc_live_0123456789abcdef.secret":          false,
		"a..c":                                      false,
		"a.b.c.d":                                   false,
		"a.b+.c":                                    false,
	} {
		if got := looksLikeJWT(tok); got != want {
			t.Errorf("looksLikeJWT(%q) = %v", tok, got)
		}
	}
}

// A cause that is the cancellation of a request its client abandoned is logged at info, not as an
// internal error; any other cause still is.
func TestLogInternalAbandonedRequests(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	base := context.WithValue(context.Background(), requestInfoKey{}, requestInfo{logger: logger})
	gone, cancel := context.WithCancel(base)
	cancel()
	logInternal(gone, "render", fmt.Errorf("react: render: %w", context.Canceled))
	if !strings.Contains(buf.String(), `"level":"INFO"`) || strings.Contains(buf.String(), "ERROR") {
		t.Errorf("abandoned request logged as %s", buf.String())
	}
	buf.Reset()
	logInternal(base, "render", errors.New("disk full"))
	if !strings.Contains(buf.String(), `"level":"ERROR"`) {
		t.Errorf("internal error logged as %s", buf.String())
	}
	buf.Reset()
	logInternal(gone, "render", errors.New("disk full"))
	if !strings.Contains(buf.String(), `"level":"ERROR"`) {
		t.Errorf("a cause that is no cancellation, on an abandoned request, logged as %s", buf.String())
	}
}
