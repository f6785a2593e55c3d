package mta

import "syscall"

// threadPriorities: on Linux each thread has a nice value of its own, so the niced set of signing threads
// exists.
const threadPriorities = true

// lowerPriority sets the calling thread's nice value (setpriority(2) with a thread id: on Linux the nice
// value belongs to each thread). Raising it needs no privilege; a failure leaves the thread at the
// process's priority, which is only slower to give way.
func lowerPriority(nice int) {
	if nice > 0 {
		_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), nice)
	}
}
