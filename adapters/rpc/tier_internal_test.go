package rpc

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// TestEveryServiceHasCallers: every Connect service of proto/ has a row in the allow-list (a new service
// fails here until it declares which tiers may call it), every row names a service or a procedure that
// exists, and names only real tiers.
func TestEveryServiceHasCallers(t *testing.T) {
	t.Parallel()
	known := map[string]bool{}
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if !strings.HasPrefix(fd.Path(), "postmill/") {
			return true
		}
		for i := range fd.Services().Len() {
			s := fd.Services().Get(i)
			known[string(s.FullName())] = true
			if _, ok := callers[string(s.FullName())]; !ok {
				t.Errorf("service %s has no row in callers (service.go)", s.FullName())
			}
			for j := range s.Methods().Len() {
				known["/"+string(s.FullName())+"/"+string(s.Methods().Get(j).Name())] = true
			}
		}
		return true
	})
	if len(known) < 10 {
		t.Fatalf("found %d services and procedures; the generated packages are not registered", len(known))
	}
	for key, allowed := range callers {
		if !known[key] {
			t.Errorf("callers has a row for %q, which is no service or procedure", key)
		}
		for _, tier := range allowed {
			if tier != TierAny && !slices.Contains([]Tier{TierEdge, TierMTA, TierInbound}, tier) {
				t.Errorf("callers[%q] names tier %q", key, tier)
			}
		}
	}
}

// updateAllowList rewrites testdata/allowlist.txt from the table instead of checking it:
// go test -run TestAllowListSnapshot -update-allowlist.
var updateAllowList = flag.Bool("update-allowlist", false, "rewrite testdata/allowlist.txt")

// TestAllowListSnapshot: for every procedure of proto/, the tiers that may call it are those written in
// testdata/allowlist.txt, so that any change to who may call what shows in review as a diff of that file.
func TestAllowListSnapshot(t *testing.T) {
	t.Parallel()
	var procedures []string
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if !strings.HasPrefix(fd.Path(), "postmill/") {
			return true
		}
		for i := range fd.Services().Len() {
			s := fd.Services().Get(i)
			for j := range s.Methods().Len() {
				procedures = append(procedures, "/"+string(s.FullName())+"/"+string(s.Methods().Get(j).Name()))
			}
		}
		return true
	})
	slices.Sort(procedures)
	var b strings.Builder
	for _, p := range procedures {
		var allowed []string
		for _, tier := range []Tier{TierEdge, TierMTA, TierInbound} {
			if mayCall(tier, p) {
				allowed = append(allowed, string(tier))
			}
		}
		if len(allowed) == 0 {
			allowed = []string{"-"}
		}
		fmt.Fprintf(&b, "%s %s\n", p, strings.Join(allowed, ","))
	}
	const golden = "testdata/allowlist.txt"
	if *updateAllowList {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("the allow-list differs from %s (run with -update-allowlist and review the diff):\n%s", golden, got)
	}
}
