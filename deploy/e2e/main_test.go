package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/postmill/postmill/adapters/react"
)

// TestMain serves isolated React Email renders: the platform these tests start in process renders each
// template in a child of the current executable, which here is this test binary, started with
// react.ChildArg (as the postmill binary's main does).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == react.ChildArg {
		if err := react.ServeChild(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if binPath != "" { // built by mustBinary: about 100 MiB
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}
