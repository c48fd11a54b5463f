//go:build linux

package mountns

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// Run re-executes this test binary, with the same arguments, in a new
// private mount namespace and returns its exit status with ran true; the
// caller's TestMain exits with it. It returns ran false, and the caller
// runs its tests in place, when this process already is the re-executed
// one, or when no namespace can be made here (not root): mounts then fail
// as they would have, with their own message.
func Run() (code int, ran bool) {
	if Inside() || os.Geteuid() != 0 {
		return 0, false
	}
	cmd := exec.Command("/proc/self/exe", os.Args[1:]...)
	cmd.Args[0] = os.Args[0]
	cmd.Env = append(os.Environ(), envInside+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// Unshareflags CLONE_NEWNS: Go also makes every mount in it private,
	// so none made inside propagates back out. Pdeathsig: the tests die
	// with this process (their own children, kgate nodes, with them).
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "mountns: no mount namespace of its own for this test binary (%v); running in place\n", err)
		return 0, false
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case s := <-sigs:
				// go test sends SIGQUIT to a binary past its timeout: the
				// tests' goroutine dump is what it wants.
				cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, true
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), true
		}
		return ee.ExitCode(), true
	default:
		fmt.Fprintf(os.Stderr, "mountns: %v\n", err)
		return 1, true
	}
}
