//go:build !linux

package mta

// lowerPriority does nothing where a thread's priority cannot be set on its own: the signing threads then
// run at the process's priority and the stage still bounds how many jobs sign at once.
func lowerPriority(int) {}
