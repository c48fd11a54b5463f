package gateway

import (
	"net"
	"syscall"
	"unsafe"
)

// unsentBytes is what the kernel still holds to send on tc, sent or not
// yet acknowledged (TIOCOUTQ); 0 if it cannot tell.
func unsentBytes(tc *net.TCPConn) int {
	rc, err := tc.SyscallConn()
	if err != nil {
		return 0
	}
	var n int32
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCOUTQ, uintptr(unsafe.Pointer(&n)))
	}); err != nil || errno != 0 {
		return 0
	}
	return int(n)
}
