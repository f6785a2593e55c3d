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

// TestEveryServiceHasCallers: every Connect service of proto/ has a row in the table that names it and
// the tiers that may call it (a new service fails here until its init calls calledBy), no two rows name
// the same service, every procedure exception belongs to its row's service, and rows name only real
// tiers.
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
			for j := range s.Methods().Len() {
				known["/"+string(s.FullName())+"/"+string(s.Methods().Get(j).Name())] = true
			}
		}
		return true
	})
	if len(known) < 10 {
		t.Fatalf("found %d services and procedures; the generated packages are not registered", len(known))
	}
	named := map[string]bool{}
	for _, s := range services {
		if !known[s.name] || strings.HasPrefix(s.name, "/") {
			t.Errorf("a row of the table names %q, which is no service (its init must call calledBy)", s.name)
		}
		if named[s.name] {
			t.Errorf("two rows of the table name %s", s.name)
		}
		named[s.name] = true
		for p := range s.procedureTiers {
			if !known[p] || !strings.HasPrefix(p, "/"+s.name+"/") {
				t.Errorf("the row of %s has tiers for %q, which is no procedure of it", s.name, p)
			}
		}
	}
	for key := range known {
		if !strings.HasPrefix(key, "/") && !named[key] {
			t.Errorf("service %s has no row in the table (an area file's init registers it)", key)
		}
	}
	for key, allowed := range allowList() {
		for _, tier := range allowed {
			if tier != TierAny && !slices.Contains([]Tier{TierEdge, TierMTA, TierInbound}, tier) {
				t.Errorf("the allow-list of %q names tier %q", key, tier)
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
	got, wantLines := strings.Split(b.String(), "\n"), strings.Split(string(want), "\n")
	for _, l := range got {
		if !slices.Contains(wantLines, l) {
			t.Errorf("the allow-list has %q, which %s has not", l, golden)
		}
	}
	for _, l := range wantLines {
		if !slices.Contains(got, l) {
			t.Errorf("%s has %q, which the allow-list has not", golden, l)
		}
	}
	if t.Failed() {
		t.Log("if the change is meant, run the test with -update-allowlist and review the diff")
	}
}
