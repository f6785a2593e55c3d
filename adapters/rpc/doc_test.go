package rpc_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLayout: every proto package but postmill.rpc.v1 has its area file, named after it, and doc.go's
// Layout names every file of the package, so the split by area stays what the documentation says.
func TestLayout(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	words := map[string]bool{}
	for _, w := range strings.FieldsFunc(string(doc), func(r rune) bool {
		return r == ' ' || r == '\n' || r == ',' || r == '(' || r == ')' || r == ';' || r == '/'
	}) {
		words[w] = true
	}
	areas, err := os.ReadDir(filepath.Join("proto", "postmill"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range areas {
		if a.Name() == "rpc" {
			continue
		}
		if _, err := os.Stat(a.Name() + ".go"); err != nil {
			t.Errorf("proto package postmill.%s.v1 has no area file %s.go", a.Name(), a.Name())
		}
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") && f != "doc.go" && !words[f] {
			t.Errorf("doc.go's Layout does not name %s", f)
		}
	}
}
