package main

import "testing"

func TestPackageOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		input, want string
		ok          bool
	}{
		{"node_modules/react/cjs/react.production.min.js", "react", true},
		{"node_modules/@react-email/text/dist/index.cjs", "@react-email/text", true},
		{"node_modules/@react-email/components/node_modules/@react-email/render/dist/browser/index.cjs",
			"@react-email/components/node_modules/@react-email/render", true},
		{"node_modules/a/node_modules/b/index.js", "a/node_modules/b", true},
		{"entry.js", "", false},
		{"node_modules/@scope", "", false},
	}
	for _, tt := range tests {
		got, ok := packageOf(tt.input)
		if got != tt.want || ok != tt.ok {
			t.Errorf("packageOf(%q) = %q, %v; want %q, %v", tt.input, got, ok, tt.want, tt.ok)
		}
	}
}
