package react

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMain serves isolated renders: a Renderer with Isolate starts os.Executable(), which in a test is this
// binary, with ChildArg. A second argument picks a misbehaving child for the tests of how the parent copes
// with one (see childMode).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ChildArg {
		mode := ""
		if len(os.Args) > 2 {
			mode = os.Args[2]
		}
		os.Exit(childMode(mode))
	}
	os.Exit(m.Run())
}

// childMode runs the child side of a test render and returns its exit status.
func childMode(mode string) int {
	var err error
	switch mode {
	case "":
		err = ServeChild(os.Stdin, os.Stdout)
	case "hang": // never answers
		select {}
	case "silent": // exits successfully without a result
		return 0
	case "spin": // burns CPU past every limit once they are set, as a native call would
		err = serveChild(os.Stdin, os.Stdout, func() {
			for {
			}
		})
	case "inspect": // renders nothing; its HTML is its environment and the descriptors it could pass on
		err = serveChild(os.Stdin, os.Stdout, func() {
			_ = writeChildResult(os.Stdout, strings.Join(os.Environ(), "\n")+"\nfds="+strings.Join(inheritable(), ","), nil)
			os.Exit(0)
		})
	default:
		err = fmt.Errorf("unknown child mode %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// inheritable lists this process's descriptors that are not close-on-exec: stdin, stdout, stderr and
// whatever it inherited and kept.
func inheritable() []string {
	fds, _ := os.ReadDir("/proc/self/fd")
	var names []string
	for _, e := range fds {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
			names = append(names, e.Name())
		}
	}
	return names
}
