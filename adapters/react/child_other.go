//go:build !linux

package react

import (
	"os"
	"runtime/debug"
	"runtime/metrics"
	"syscall"
)

// limitChild sets only the Go memory limit outside Linux: the address-space and CPU rlimits are set on
// Linux, where Postmill is deployed, and elsewhere the child keeps the in-process watchdogs and the
// parent's wall-clock kill.
func limitChild(cfg Config) error {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	debug.SetMemoryLimit(int64(s[0].Value.Uint64()-s[1].Value.Uint64()) + cfg.MemoryLimit)
	return nil
}

// closeInheritedFiles does nothing outside Linux, where descriptors are not listed from /proc.
func closeInheritedFiles() error { return nil }

func childSysProcAttr() *syscall.SysProcAttr { return nil }

func killedAtCPULimit(*os.ProcessState) bool { return false }
