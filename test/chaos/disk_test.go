//go:build chaos && linux

package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A full disk. When the run includes the full-disk kind, every node's data
// directory is a tmpfs of its own (mounting needs root: without it the
// campaign fails at the start rather than leave the kind out). Between
// fills the file system is roomy (diskRoom; a tmpfs takes memory only for
// what is written). To fill it the nemesis shrinks it to what the node
// uses plus a little (a tmpfs is resized by a remount, its contents kept),
// then writes a filler file until not one byte more fits: the node's next
// write fails with ENOSPC as on a real full disk, without the campaign
// writing a gigabyte each time. Freeing deletes the filler and gives the
// room back.

// diskRoom is the size of a node's file system between fills.
const diskRoom = 2 << 30

// fillMargin is what the shrunken file system has free before the filler
// takes it: room for the remount to succeed while the node writes on.
const fillMargin = 1 << 20

// fullDiskStop bounds how long a node with a full disk may take to stop:
// under the workload its next write fails within moments.
const fullDiskStop = 30 * time.Second

// diskFullLine is what kgate logs when it stops for a full disk
// (docs/reliability.md, "Full disk").
const diskFullLine = "the disk of the data directory is full"

type smallDisk struct {
	dir, filler string
}

// mountSmallDisk mounts a tmpfs of diskRoom bytes on dir.
func mountSmallDisk(dir string) (*smallDisk, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0755", diskRoom)); err != nil {
		return nil, fmt.Errorf("the full-disk kind mounts a tmpfs on each node's data directory, which needs root (or leave the kind out with -kinds): mount tmpfs on %s: %w", dir, err)
	}
	return &smallDisk{dir: dir, filler: dir + "/chaos-filler"}, nil
}

// used is the bytes the file system holds.
func (d *smallDisk) used() (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(d.dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize, nil
}

func (d *smallDisk) resize(bytes int64) error {
	return syscall.Mount("tmpfs", d.dir, "tmpfs", syscall.MS_REMOUNT, fmt.Sprintf("size=%d,mode=0755", bytes))
}

// fill shrinks the file system to what it holds plus fillMargin and writes
// the filler until no byte more fits; it returns the bytes used before and
// the filler's size.
func (d *smallDisk) fill() (used, filled int64, err error) {
	// The node writes on meanwhile: a size below what it holds by the
	// time of the remount is refused (EINVAL), then try again.
	for try := 0; ; try++ {
		if used, err = d.used(); err != nil {
			return 0, 0, err
		}
		size := (used + fillMargin + 4095) &^ 4095
		if err = d.resize(size); err == nil {
			break
		}
		if !errors.Is(err, syscall.EINVAL) || try == 20 {
			return 0, 0, fmt.Errorf("shrinking the tmpfs on %s to %d bytes: %w", d.dir, size, err)
		}
	}
	f, err := os.OpenFile(d.filler, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return used, 0, err
	}
	defer f.Close()
	for _, size := range []int{64 << 10, 4096, 1} {
		buf := make([]byte, size)
		for {
			m, err := f.Write(buf)
			filled += int64(m)
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil {
				return used, filled, fmt.Errorf("filling %s: %w", d.dir, err)
			}
		}
	}
	return used, filled, nil
}

// free deletes the filler and gives the file system its room back.
func (d *smallDisk) free() error {
	if err := os.Remove(d.filler); err != nil {
		return err
	}
	return d.resize(diskRoom)
}

// unmount unmounts the file system; keep first copies what it holds to
// keep (the nodes' data, kept on a failure).
func (d *smallDisk) unmount(keep string) error {
	if keep != "" {
		if out, err := exec.Command("cp", "-a", d.dir, keep).CombinedOutput(); err != nil {
			return fmt.Errorf("keeping %s in %s: %v: %s", d.dir, keep, err, out)
		}
	}
	if err := syscall.Unmount(d.dir, 0); err != nil {
		// Something still holds it open: detach it now, freed when closed.
		return errors.Join(err, syscall.Unmount(d.dir, syscall.MNT_DETACH))
	}
	return nil
}

// awaitDiskFullStop waits for node nd, whose disk is full, to stop by
// itself as kgate does on a full disk: a non-zero exit, the log naming the
// full disk, no panic.
func (nd *node) awaitDiskFullStop(limit time.Duration) error {
	nd.mu.Lock()
	ch := nd.exited
	nd.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(limit):
		return fmt.Errorf("node %d still running %v after its disk filled; its log ends:\n%s", nd.id, limit, tailFile(nd.logPath, 30))
	}
	nd.mu.Lock()
	exitErr := nd.exitErr
	nd.mu.Unlock()
	run := lastRun(nd.logPath)
	var problems []string
	if exitErr == nil {
		problems = append(problems, "exited 0, want a non-zero exit (fail-stop)")
	}
	if !strings.Contains(run, diskFullLine) {
		problems = append(problems, fmt.Sprintf("its log does not say %q", diskFullLine))
	}
	if strings.Contains(run, "panic") || strings.Contains(run, "goroutine ") {
		problems = append(problems, "it panicked")
	}
	if problems != nil {
		return fmt.Errorf("node %d on a full disk: %s (%v); its log ends:\n%s", nd.id, strings.Join(problems, "; "), exitErr, tailFile(nd.logPath, 40))
	}
	return nil
}

// lastRun is the log of a node's last start (nd.start writes a "=== "
// line before each).
func lastRun(logPath string) string {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return ""
	}
	s := string(b)
	if i := strings.LastIndex(s, "\n=== "); i >= 0 {
		return s[i+1:]
	}
	return s
}

// fillDisk fills node nd's disk under the load and waits for it to stop by
// itself; then, as a supervisor would, starts it again on the still-full
// disk, where it must stop the same way (its data unharmed: the campaign
// restarts it once the space is freed, and the final read judges).
func (c *cluster) fillDisk(nd *node, fault int) error {
	nd.mu.Lock()
	nd.killing = true // its exit is expected
	nd.mu.Unlock()
	at := time.Now()
	used, filled, err := nd.disk.fill()
	if err != nil {
		return err
	}
	if err := nd.awaitDiskFullStop(fullDiskStop); err != nil {
		return err
	}
	c.t.Logf("fault %d: node %d's disk filled (%d bytes in use, %d of filler to the last byte); it stopped %v later, naming the full disk",
		fault, nd.id, used, filled, time.Since(at).Round(time.Millisecond))
	again := time.Now()
	nd.startExpecting(true)
	if err := nd.awaitDiskFullStop(fullDiskStop); err != nil {
		return fmt.Errorf("started again on the full disk: %w", err)
	}
	c.t.Logf("fault %d: started again on the still-full disk, node %d stopped the same way after %v", fault, nd.id,
		time.Since(again).Round(time.Millisecond))
	return nil
}

// sameReplicas waits until every node reports (DescribeLogDirs, which each
// node answers for its own files) the same size for every partition of
// every topic, and returns them.
func (c *cluster) sameReplicas(limit time.Duration) (string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.kafkaAddrs()...))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var same string
	err = pollUntil(limit, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		all, err := adm.DescribeAllLogDirs(ctx, nil) // nil: every node, each for itself
		if err != nil {
			return err
		}
		if len(all) != len(c.nodes) {
			return fmt.Errorf("log dirs of %d nodes, want %d", len(all), len(c.nodes))
		}
		first, firstID := "", int32(0)
		for broker, dirs := range all {
			sizes := map[string]int64{}
			for _, d := range dirs {
				if d.Err != nil {
					return fmt.Errorf("node %d dir %s: %w", broker, d.Dir, d.Err)
				}
				for t, ps := range d.Topics {
					for p, dp := range ps {
						sizes[fmt.Sprintf("%s/%d", t, p)] += dp.Size
					}
				}
			}
			s := fmt.Sprint(sizes) // keys sorted
			if first == "" {
				first, firstID = s, broker
			} else if s != first {
				return fmt.Errorf("partition sizes differ: node %d %s, node %d %s", firstID, first, broker, s)
			}
		}
		same = first
		return nil
	})
	return same, err
}
