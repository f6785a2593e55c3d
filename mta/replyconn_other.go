//go:build !unix

package mta

import "syscall"

// socketReadable cannot look at a socket without reading it here; what the session's readers hold is
// still checked (inputWaiting).
func socketReadable(syscall.Conn) bool { return false }
