package react

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// childAddressAllowance is the address space a child may add, beyond Config.MemoryLimit, to what it has
// mapped when its limits are set. That base is large and measured at run time: about 1.3 GiB for the
// postmill binary, nearly all of it address space the Go runtime reserves at start without touching
// (its page allocator's and heap arena index's tables), with 30 to 45 MiB resident. On top of it the Go
// runtime reserves heap in 64 MiB arenas and never returns address space, each OS thread of a binary
// built with cgo reserves an 8 MiB stack, and a typical render (esbuild's transform, a fresh goja runtime
// running the bundle) grew the child's address space by about 10 MiB. With a 64 MiB MemoryLimit,
// renders that keep up to 60 MiB live passed with allowances from 64 MiB up, and an allowance of 16 or
// 32 MiB killed some of them; 128 MiB leaves twice the smallest that worked.
const childAddressAllowance = 128 << 20

// childCPUAllowance is added to twice Config.CPUTimeLimit for the child's RLIMIT_CPU: the limit counts the
// whole process (garbage collection on other threads, compiling the template), while the watchdog inside
// counts the render's thread only and stops it first with the precise message. RLIMIT_CPU is the
// backstop for a native call that ignores the interrupt.
const childCPUAllowance = time.Second

// limitChild puts the hard limits on the child process: RLIMIT_AS at the address space mapped now plus
// MemoryLimit plus childAddressAllowance, so that a render allocating past them fails to map memory and
// the Go runtime dies with "out of memory", wherever the allocation happens (a single native call
// included); RLIMIT_CPU at the CPU time used so far plus twice CPUTimeLimit plus childCPUAllowance, whole
// seconds; and the Go memory limit at the memory in use now plus MemoryLimit, so that the collector works
// harder before garbage could push the heap against the address-space limit. Both rlimits are set as soft
// and hard limits, so that the render cannot raise them; a lower hard limit inherited from the parent is
// kept.
func limitChild(cfg Config) error {
	mapped, err := mappedBytes()
	if err != nil {
		return err
	}
	if err := lowerRlimit(unix.RLIMIT_AS, mapped+uint64(cfg.MemoryLimit)+childAddressAllowance); err != nil {
		return fmt.Errorf("RLIMIT_AS: %w", err)
	}
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return fmt.Errorf("getrusage: %w", err)
	}
	cpu := time.Duration(ru.Utime.Nano()+ru.Stime.Nano()) + 2*cfg.CPUTimeLimit + childCPUAllowance
	if err := lowerRlimit(unix.RLIMIT_CPU, uint64((cpu+time.Second-1)/time.Second)); err != nil {
		return fmt.Errorf("RLIMIT_CPU: %w", err)
	}
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	debug.SetMemoryLimit(int64(s[0].Value.Uint64()-s[1].Value.Uint64()) + cfg.MemoryLimit)
	return nil
}

// lowerRlimit sets resource's soft and hard limits to v, or to the current hard limit when that is lower.
func lowerRlimit(resource int, v uint64) error {
	var cur unix.Rlimit
	if err := unix.Getrlimit(resource, &cur); err != nil {
		return err
	}
	v = min(v, cur.Max)
	return unix.Setrlimit(resource, &unix.Rlimit{Cur: v, Max: v})
}

// mappedBytes is the process's address space now (VmSize in /proc/self/status): what RLIMIT_AS counts.
func mappedBytes() (uint64, error) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmSize:")); ok {
			kb, err := strconv.ParseUint(string(bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("VmSize %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmSize in /proc/self/status")
}

// closeInheritedFiles closes every descriptor above standard error that is not close-on-exec. The parent
// passes the child only stdin, stdout and stderr, but a descriptor the parent itself inherited without
// close-on-exec (from a shell or a supervisor) survives every exec; the Go runtime and the standard library
// open all of theirs close-on-exec, so what this closes was inherited.
func closeInheritedFiles() error {
	dir, err := os.Open("/proc/self/fd")
	if err != nil {
		return err
	}
	names, err := dir.Readdirnames(-1)
	dir.Close()
	if err != nil {
		return err
	}
	for _, name := range names {
		fd, err := strconv.Atoi(name)
		if err != nil || fd <= 2 {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue // the listing's own descriptor, already closed, or the runtime's
		}
		if err := unix.Close(fd); err != nil {
			return fmt.Errorf("close inherited descriptor %d: %w", fd, err)
		}
	}
	return nil
}

// childSysProcAttr kills the child when the thread that started it ends (see renderInChild), so that a
// parent that dies leaves no render running.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// killedAtCPULimit reports whether the child died of the signal the kernel sends at RLIMIT_CPU's hard
// limit (SIGKILL; SIGXCPU, had Go not ignored it).
func killedAtCPULimit(state *os.ProcessState) bool {
	ws, ok := state.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && (ws.Signal() == syscall.SIGKILL || ws.Signal() == syscall.SIGXCPU)
}
