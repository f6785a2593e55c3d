package domain

import (
	"strings"
	"testing"
)

func TestNewRequiresDeps(t *testing.T) {
	t.Parallel()
	if _, err := New(validConfig(), Deps{}); err == nil || !strings.Contains(err.Error(), "required") {
		t.Fatalf("New without deps: %v", err)
	}
	if _, err := New(Config{}, Deps{}); err == nil || !strings.Contains(err.Error(), "SPF include") {
		t.Fatalf("New with empty config: %v", err)
	}
}
