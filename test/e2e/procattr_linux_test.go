//go:build linux

package e2e

import "syscall"

// serverProcAttr puts kgate in its own process group, so that only signals
// meant for it reach it, and makes the kernel kill it if the test binary dies
// without running its cleanups (for example on a go test -timeout panic).
func serverProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// groupProcAttr puts a client program in its own process group so that a
// timeout kills the program and everything it started.
func groupProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
