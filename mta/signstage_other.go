//go:build !linux

package mta

// threadPriorities: elsewhere a thread's priority cannot be set on its own, and the stage has no niced set
// of threads (it would only duplicate the other).
const threadPriorities = false

// lowerPriority does nothing where a thread's priority cannot be set on its own (and the stage starts no
// niced threads there); the stage still bounds how many jobs sign at once.
func lowerPriority(int) {}
