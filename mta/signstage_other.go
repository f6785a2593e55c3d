//go:build !linux

package mta

// threadPriorities: elsewhere a thread's priority cannot be set on its own, and the stage has no niced set
// of threads (it would only duplicate the other).
const threadPriorities = false

// lowerPriority does nothing where a thread's priority cannot be set on its own: the signing threads then
// run at the process's priority and the stage still bounds how many jobs sign at once.
func lowerPriority(int) {}
