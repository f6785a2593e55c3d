// Package archtest enforces STYLE.md §1: imports point inward. It reads `go list -deps` for every module of
// the workspace, so a forbidden import fails `make test` the moment it is written.
package archtest

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const modPrefix = "github.com/postmill/postmill/"

// drivers are infrastructure libraries that only adapters (and the composition root) may import.
var drivers = []string{
	"github.com/jackc/pgx", "github.com/twmb/franz-go", "github.com/ClickHouse/clickhouse-go",
	"github.com/minio/minio-go", "github.com/emersion/go-smtp", "github.com/miekg/dns", "connectrpc.com/connect",
	"github.com/danielgtaylor/huma",
}

func repoRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("go.work not found above the test directory")
		}
		dir = parent
	}
}

type pkg struct {
	path     string
	imports  []string // direct, non-test
	deps     []string // transitive, non-test
	standard bool
}

// listPackages returns every package of a module with its direct imports and transitive dependencies.
func listPackages(tb testing.TB, root, module string) []pkg {
	tb.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \",\"}}|{{join .Deps \",\"}}", "./"+module+"/...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("go list %s: %v\n%s", module, err, stderr.String())
	}
	var pkgs []pkg
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), "|", 3)
		if len(parts) != 3 {
			continue
		}
		pkgs = append(pkgs, pkg{path: parts[0], imports: split(parts[1]), deps: split(parts[2])})
	}
	return pkgs
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func isStd(path string) bool {
	first := strings.SplitN(path, "/", 2)[0]
	return !strings.Contains(first, ".")
}

func module(path string) string {
	rest, ok := strings.CutPrefix(path, modPrefix)
	if !ok {
		return ""
	}
	return strings.SplitN(rest, "/", 2)[0]
}

func hasPrefixAny(path string, prefixes []string) bool {
	for _, p := range prefixes {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

func TestImportsPointInward(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	tiers := []string{"edge", "mta", "inbound", "analytics"}

	for _, p := range listPackages(t, root, "ports") {
		for _, d := range p.deps {
			if !isStd(d) && module(d) != "ports" {
				t.Errorf("%s depends on %s: ports imports only the standard library", p.path, d)
			}
		}
	}
	for _, p := range listPackages(t, root, "core") {
		for _, d := range p.deps {
			if m := module(d); m != "" && m != "core" && m != "ports" {
				t.Errorf("%s depends on %s: core imports only ports", p.path, d)
			}
			if hasPrefixAny(d, drivers) || d == "database/sql" {
				t.Errorf("%s depends on %s: core reaches infrastructure only through ports", p.path, d)
			}
		}
		for _, i := range p.imports {
			if i == "net/http" || i == "net/smtp" {
				t.Errorf("%s imports %s: the core holds no transport", p.path, i)
			}
		}
	}
	for _, p := range listPackages(t, root, "adapters") {
		own := adapterOf(p.path)
		for _, d := range p.deps {
			switch m := module(d); {
			case m == "" || m == "ports":
			case m != "adapters":
				t.Errorf("%s depends on %s: adapters import ports, never core or a tier", p.path, d)
			case adapterOf(d) != own:
				t.Errorf("%s depends on %s: adapters never import each other", p.path, d)
			}
		}
	}
	for _, tier := range tiers {
		for _, p := range listPackages(t, root, tier) {
			for _, d := range p.deps {
				if m := module(d); m != "" && m != tier && m != "ports" && m != "adapters" {
					t.Errorf("%s depends on %s: a tier imports ports and adapters, never core or another tier", p.path, d)
				}
			}
		}
	}
}

// adapterOf names the adapter a package belongs to: adapters/postgres/pgtest belongs to postgres.
func adapterOf(path string) string {
	rest := strings.TrimPrefix(path, modPrefix+"adapters/")
	return strings.SplitN(rest, "/", 2)[0]
}

// TestRuleCatchesViolations proves the checks above can fail: the helpers classify known-bad paths as bad.
func TestRuleCatchesViolations(t *testing.T) {
	t.Parallel()
	if module(modPrefix+"core/account") != "core" || module("github.com/jackc/pgx/v5") != "" {
		t.Fatal("module() misclassifies paths")
	}
	if !hasPrefixAny("github.com/jackc/pgx/v5/pgxpool", drivers) || hasPrefixAny("github.com/jackc/pgxx", drivers) {
		t.Fatal("driver matching is wrong")
	}
	if adapterOf(modPrefix+"adapters/postgres/pgtest") != "postgres" || adapterOf(modPrefix+"adapters/rpc/gen/x") != "rpc" {
		t.Fatal("adapterOf misclassifies paths")
	}
	if !isStd("net/http") || isStd("github.com/x/y") {
		t.Fatal("isStd misclassifies paths")
	}
}
