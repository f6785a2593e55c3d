// Package archtest enforces STYLE.md §1 (imports point inward) and ARCHITECTURE.md's rule that each
// infrastructure library stays in the package built around it. It reads `go list` for every module of the
// workspace, so a forbidden import fails `make test` the moment it is written. What it guards, for the
// non-test code of every module but deploy (the composition root, which may import anything):
//
//   - ports depends on the standard library only (directly or through anything it imports);
//   - core depends on core, ports and third-party libraries outside the table below, never on an adapter,
//     a tier, database/sql or any library of the table (directly or transitively), and imports neither
//     net/http nor net/smtp: it holds no transport;
//   - an adapter depends on ports and on no other adapter, core package or tier (transitively);
//   - a tier (edge, mta, inbound, analytics) depends on ports and adapters, never on core or another tier
//     (transitively);
//   - each library of the table below is imported directly only by the packages it names: the PostgreSQL
//     driver and migrator by adapters/postgres, Kafka by adapters/kafka, ClickHouse by adapters/clickhouse,
//     S3 by adapters/s3, DNS by adapters/dns, Connect and protobuf by adapters/rpc, the JavaScript runtime and
//     compiler by adapters/react, huma by the edge module, the SMTP libraries (go-smtp, go-sasl) by
//     adapters/smtpd, edge/submission, inbound and mta, Stripe's client by adapters/stripe, and dskit by
//     nothing outside deploy.
//
// A tier may still reach a library through an adapter it imports (that is what adapters are for); the
// table is about who writes code against the library.
package archtest

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

const modPrefix = "github.com/postmill/postmill/"

// libraryRule names infrastructure libraries (import path prefixes) and the Postmill packages (paths
// relative to modPrefix, each with its subpackages) that may import them directly.
type libraryRule struct {
	libraries []string
	allowed   []string
}

// libraries is the table of the package comment. Core depends on none of these libraries at all.
var libraries = []libraryRule{
	{[]string{"github.com/jackc/pgx", "github.com/pressly/goose"}, []string{"adapters/postgres"}},
	{[]string{"github.com/twmb/franz-go"}, []string{"adapters/kafka"}},
	{[]string{"github.com/ClickHouse/clickhouse-go"}, []string{"adapters/clickhouse"}},
	{[]string{"github.com/minio/minio-go"}, []string{"adapters/s3"}},
	{[]string{"github.com/miekg/dns"}, []string{"adapters/dns"}},
	{[]string{"connectrpc.com", "google.golang.org/protobuf"}, []string{"adapters/rpc"}},
	{[]string{"github.com/dop251/goja", "github.com/evanw/esbuild"}, []string{"adapters/react"}},
	{[]string{"github.com/danielgtaylor/huma"}, []string{"edge"}},
	{[]string{"github.com/emersion/go-smtp", "github.com/emersion/go-sasl"}, []string{"adapters/smtpd", "edge/submission", "inbound", "mta"}},
	{[]string{"github.com/stripe/stripe-go"}, []string{"adapters/stripe"}},
	{[]string{"github.com/grafana/dskit"}, nil},
}

// checkedModules are the modules whose packages the rules apply to: all but deploy.
var checkedModules = []string{"ports", "core", "adapters", "edge", "mta", "inbound", "analytics"}

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
	path    string
	imports []string // direct, non-test
	deps    []string // transitive, non-test
}

// listed caches listPackages by module: both tests read every module, and go list is slow on a busy machine.
var listed = struct {
	sync.Mutex
	m map[string][]pkg
}{m: map[string][]pkg{}}

// listPackages returns every package of a module with its direct imports and transitive dependencies.
func listPackages(tb testing.TB, root, module string) []pkg {
	tb.Helper()
	listed.Lock()
	defer listed.Unlock()
	if pkgs, ok := listed.m[module]; ok {
		return pkgs
	}
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
	if len(pkgs) == 0 {
		tb.Fatalf("go list %s found no packages", module)
	}
	listed.m[module] = pkgs
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

// ruleFor returns the rule of the table that covers library path imp, if any.
func ruleFor(imp string) (libraryRule, bool) {
	for _, r := range libraries {
		if hasPrefixAny(imp, r.libraries) {
			return r, true
		}
	}
	return libraryRule{}, false
}

// mayImport reports whether Postmill package p may import imp directly under the library table.
func mayImport(p, imp string) bool {
	r, ok := ruleFor(imp)
	if !ok {
		return true
	}
	rel, ok := strings.CutPrefix(p, modPrefix)
	return ok && hasPrefixAny(rel, r.allowed)
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
			if _, ok := ruleFor(d); ok || d == "database/sql" {
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

// TestLibrariesStayInTheirPackages checks the library table against every direct import.
func TestLibrariesStayInTheirPackages(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	for _, m := range checkedModules {
		for _, p := range listPackages(t, root, m) {
			for _, i := range p.imports {
				if !mayImport(p.path, i) {
					r, _ := ruleFor(i)
					t.Errorf("%s imports %s: only %s may (deploy/archtest's library table)", p.path, i, allowedText(r))
				}
			}
		}
	}
}

func allowedText(r libraryRule) string {
	if len(r.allowed) == 0 {
		return "the deploy module"
	}
	return strings.Join(r.allowed, ", ") + " and the deploy module"
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
	if _, ok := ruleFor("github.com/jackc/pgx/v5/pgxpool"); !ok {
		t.Fatal("pgx is not in the library table")
	}
	if _, ok := ruleFor("github.com/jackc/pgxx"); ok {
		t.Fatal("library matching is by prefix of path elements, not of characters")
	}
	if adapterOf(modPrefix+"adapters/postgres/pgtest") != "postgres" || adapterOf(modPrefix+"adapters/rpc/gen/x") != "rpc" {
		t.Fatal("adapterOf misclassifies paths")
	}
	if !isStd("net/http") || isStd("github.com/x/y") {
		t.Fatal("isStd misclassifies paths")
	}
	for _, c := range []struct {
		pkg, imp string
		want     bool
	}{
		{"edge", "github.com/danielgtaylor/huma/v2", true},
		{"mta", "github.com/danielgtaylor/huma/v2", false},
		{"core/sending", "github.com/danielgtaylor/huma/v2", false},
		{"edge/submission", "github.com/emersion/go-smtp", true},
		{"edge", "github.com/emersion/go-smtp", false},
		{"adapters/smtpd", "github.com/emersion/go-smtp", true},
		{"adapters/postgres/internal/db", "github.com/jackc/pgx/v5", true},
		{"adapters/postgresx", "github.com/jackc/pgx/v5", false},
		{"inbound", "github.com/jackc/pgx/v5/pgxpool", false},
		{"edge", "connectrpc.com/connect", false},
		{"adapters/rpc/gen/postmill/email/v1/emailv1connect", "connectrpc.com/connect", true},
		{"mta", "github.com/grafana/dskit/services", false},
		{"mta", "github.com/emersion/go-msgauth/dkim", true},
	} {
		if got := mayImport(modPrefix+c.pkg, c.imp); got != c.want {
			t.Errorf("mayImport(%s, %s) = %v, want %v", c.pkg, c.imp, got, c.want)
		}
	}
}
