//go:build unix

package mta

import "syscall"

// socketReadable reports whether the socket has bytes to read, or its peer has closed it, without
// waiting and without taking anything from it (MSG_PEEK).
func socketReadable(c syscall.Conn) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var rerr error
	b := make([]byte, 1)
	if err := rc.Read(func(fd uintptr) bool {
		_, _, rerr = syscall.Recvfrom(int(fd), b, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	}); err != nil {
		return false
	}
	return rerr == nil // EAGAIN: nothing waiting; n > 0: input; n == 0: closed by the peer
}
