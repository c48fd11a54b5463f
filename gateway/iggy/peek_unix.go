//go:build unix

package iggy

import (
	"errors"
	"net"
	"syscall"
)

// peerClosed looks at a TCP socket without blocking or consuming: closed
// is true when the peer has closed it (EOF or reset) or sent bytes nobody
// asked for; known is false when the socket cannot be inspected.
func peerClosed(nc net.Conn) (closed, known bool) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false, false
	}
	var n int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, rerr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true // never wait for readiness
	})
	switch {
	case err != nil:
		return false, false
	case errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EWOULDBLOCK):
		return false, true
	case rerr != nil, n >= 0:
		return true, true // reset, EOF (n == 0) or unsolicited bytes
	}
	return false, true
}
