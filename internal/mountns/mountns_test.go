//go:build linux

package mountns_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kgate/kgate/internal/mountns"
)

// envHelper makes the test binary the helper below instead of its tests:
// "hang" or "panic", then the directory to mount on.
const envHelper = "KGATE_MOUNTNS_HELPER"

func TestMain(m *testing.M) {
	if code, ran := mountns.Run(); ran {
		os.Exit(code)
	}
	if h := os.Getenv(envHelper); h != "" {
		helper(h)
	}
	os.Exit(m.Run())
}

// helper mounts a tmpfs as the full-disk tests do, says so, and then ends
// the way a test binary ends without its cleanups: killed (it waits for
// that), or a panic, as go test's -timeout ends one.
func helper(spec string) {
	how, dir, _ := strings.Cut(spec, ":")
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		fmt.Println("mount:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(filepath.Join(dir, "on-the-tmpfs"), nil, 0o644); err != nil {
		fmt.Println("write:", err)
		os.Exit(1)
	}
	fmt.Printf("mounted %d\n", os.Getpid())
	if how == "panic" {
		panic("test timed out after 1ms")
	}
	os.Stdin.Read(make([]byte, 1)) // until killed
	os.Exit(1)
}

// A test binary that ends without running its cleanups (killed, or by its
// own timeout) leaves nothing mounted: the helper mounts a tmpfs, which
// the namespace the test runs in never sees, and once the helper is gone
// nothing of it is left (its directory is as before, and no process
// holds its namespace).
func TestMountsGoWithTheTestBinary(t *testing.T) {
	if !mountns.Inside() {
		t.Fatal("the test binary was not re-executed in a mount namespace of its own (it needs root)")
	}
	for _, how := range []string{"kill", "panic"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			mode := "hang"
			if how == "panic" {
				mode = "panic"
			}
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			// Without the mark the helper makes a namespace of its own, as
			// a test binary started by go test does.
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "KGATE_TEST_MOUNT_NS=") {
					cmd.Env = append(cmd.Env, kv)
				}
			}
			cmd.Env = append(cmd.Env, envHelper+"="+mode+":"+dir)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = nil // the panic's trace is not this test's output
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(out).ReadString('\n')
			pid, perr := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "mounted ")))
			if err != nil || perr != nil {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("helper said %q (%v)", line, err)
			}
			if mounted(t, dir) {
				t.Errorf("the helper's tmpfs on %s is mounted in this test's namespace", dir)
			}
			if how == "kill" {
				cmd.Process.Kill() // the outer process, as go test or a user kills it
			}
			cmd.Wait()
			// The inner process dies with the outer one (Pdeathsig).
			for deadline := time.Now().Add(10 * time.Second); processExists(pid); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the helper's test process %d still runs after its parent ended", pid)
				}
			}
			if mounted(t, dir) {
				t.Errorf("%s is still a mount point after the helper ended", dir)
			}
			if _, err := os.Stat(filepath.Join(dir, "on-the-tmpfs")); err == nil {
				t.Errorf("the file written on the helper's tmpfs is in %s", dir)
			}
		})
	}
}

// mounted reports whether dir is a mount point in this process's namespace.
func mounted(t *testing.T, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

func processExists(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// A zombie has ended; its parent has not reaped it yet.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || !strings.HasPrefix(s[i+1:], " Z")
}
