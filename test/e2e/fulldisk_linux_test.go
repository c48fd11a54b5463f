//go:build linux

package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// smallDisk is a size-limited file system mounted on a node's data
// directory, to be filled and freed. By default it is a tmpfs: unlike a
// loop-mounted ext4 image it needs no loop device or mkfs, which containers
// often lack, and ENOSPC comes the same way (a write that needs a new page
// fails). KGATE_E2E_SMALL_DISK=ext4 mounts an ext4 image through a loop
// device instead (closer to a real disk; no blocks reserved for root).
// Mounting needs root; without it the test fails, as TestQuickstart does
// without its network namespace.
type smallDisk struct {
	dir    string
	filler string
}

const envSmallDisk = "KGATE_E2E_SMALL_DISK"

func mountSmallDisk(t *testing.T, dir string, sizeMiB int) *smallDisk {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	switch kind := os.Getenv(envSmallDisk); kind {
	case "", "tmpfs":
		if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%dm", sizeMiB)); err != nil {
			t.Fatalf("this test needs root to mount a %d MiB tmpfs on %s as a node's small disk: %v", sizeMiB, dir, err)
		}
	case "ext4":
		img := dir + ".ext4"
		for _, argv := range [][]string{
			{"truncate", "-s", fmt.Sprintf("%dM", sizeMiB), img},
			{"mkfs.ext4", "-q", "-F", "-m", "0", img},
			{"mount", "-o", "loop", img, dir},
		} {
			if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
				t.Fatalf("%s=ext4 needs root, mkfs.ext4 and a loop device: %v: %v\n%s", envSmallDisk, argv, err, out)
			}
		}
	default:
		t.Fatalf("%s=%q: want tmpfs or ext4", envSmallDisk, kind)
	}
	t.Cleanup(func() {
		// Every node is killed before this runs (cleanups run last first).
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Logf("unmount %s: %v; detaching it lazily", dir, err)
			if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", dir, err)
			}
		}
	})
	return &smallDisk{dir: dir, filler: filepath.Join(dir, "filler")}
}

// fill writes the filler file until the file system has no byte left and
// returns how many bytes it took.
func (d *smallDisk) fill(t *testing.T) int64 {
	t.Helper()
	f, err := os.OpenFile(d.filler, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var n int64
	for _, size := range []int{1 << 20, 4096, 1} {
		buf := make([]byte, size)
		for {
			m, err := f.Write(buf)
			n += int64(m)
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil {
				t.Fatalf("filling %s: %v", d.dir, err)
			}
		}
	}
	return n
}

// free deletes the filler.
func (d *smallDisk) free(t *testing.T) {
	t.Helper()
	if err := os.Remove(d.filler); err != nil {
		t.Fatal(err)
	}
}

// usage is the bytes used and the size of the file system.
func (d *smallDisk) usage() (used, size int64) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(d.dir, &st); err != nil {
		return -1, -1
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize, int64(st.Blocks) * st.Bsize
}
