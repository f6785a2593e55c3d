package ports_test

import (
	"os"
	"strings"
	"testing"
)

// TestDocListsEveryFile: the index in doc.go names every file and package of ports, so a newcomer finds
// each area's file there, and names nothing that is gone.
func TestDocListsEveryFile(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		if rest, ok := strings.CutPrefix(line, "//\t"); ok {
			if name, _, ok := strings.Cut(rest, " "); ok {
				listed[name] = true
			}
		}
	}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	present := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		switch {
		case e.IsDir() && name != "testdata":
			name += "/"
		case !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || name == "doc.go":
			continue
		}
		present[name] = true
		if !listed[name] {
			t.Errorf("doc.go's index does not list %s", name)
		}
	}
	for name := range listed {
		if !present[name] {
			t.Errorf("doc.go's index lists %s, which is not in ports", name)
		}
	}
}
