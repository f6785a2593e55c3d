package dns

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSystemServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct{ path, want string }{
		{write("v4", "# comment\nsearch example.test\nnameserver 192.0.2.53\nnameserver 192.0.2.54\n"), "192.0.2.53:53"},
		{write("v6", "nameserver 2001:db8::53\n"), "[2001:db8::53]:53"},
		{write("none", "search example.test\n"), "127.0.0.1:53"},
		{filepath.Join(dir, "missing"), "127.0.0.1:53"},
	}
	for _, tt := range tests {
		if got := systemServer(tt.path); got != tt.want {
			t.Errorf("systemServer(%s) = %q; want %q", filepath.Base(tt.path), got, tt.want)
		}
	}
}

func TestUnescape(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{`plain; text=1`, `plain; text=1`},
		{`a\"b`, `a"b`},
		{`back\\slash`, `back\slash`},
		{`\001\255end`, "\x01\xffend"},
		{`\12x`, `12x`},
		{`trailing\`, `trailing\`},
	}
	for _, tt := range tests {
		if got := unescape(tt.in); got != tt.want {
			t.Errorf("unescape(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}
