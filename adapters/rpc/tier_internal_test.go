package rpc

import (
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
