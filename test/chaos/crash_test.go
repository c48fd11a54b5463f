//go:build chaos && linux

package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// Crashes inside a snapshot and inside the Raft log's compaction. A node
// takes a snapshot when asked (GET /v1/snapshot runs Raft's user snapshot
// on that node, which then compacts its log as a scheduled one would). The
// nemesis watches the node's data directory with inotify and sends SIGKILL
// the moment a file of the chosen step appears, so the kill lands inside
// that step (or a few microseconds after it) rather than wherever a timer
// falls.

// crashWindow is one step of a snapshot or a compaction to kill the node in.
type crashWindow struct {
	name string
	dir  string // under the data directory
	mask uint32
	file func(name string) bool
	// left reports what the kill left behind, read after the process
	// is gone: evidence it landed inside the step.
	left func(dataDir string) string
}

var (
	snapshotWindows = []crashWindow{
		{name: "snapshot started (Raft's temporary snapshot directory created)", dir: "raft/snapshots", mask: syscall.IN_CREATE,
			file: func(n string) bool { return strings.HasSuffix(n, ".tmp") }, left: leftSnapshotTmp},
		{name: "FSM checkpoint being written", dir: "fsm", mask: syscall.IN_CREATE,
			file: func(n string) bool { return n == "checkpoint.tmp" }, left: leftSnapshotTmp},
		{name: "FSM checkpoint renamed, snapshot stream being written", dir: "fsm", mask: syscall.IN_MOVED_TO,
			file: func(n string) bool { return n == "checkpoint" }, left: leftSnapshotTmp},
		// A snapshot hard-links the segment files into a staging
		// directory, then moves it into the snapshot's directory.
		{name: "segment files being linked (staging directory created)", dir: "raft/snapshot-links", mask: syscall.IN_CREATE,
			file: func(n string) bool { return strings.HasPrefix(n, "links-") }, left: leftSnapshotTmp},
		{name: "segment links moved into the snapshot", dir: "raft/snapshot-links", mask: syscall.IN_MOVED_FROM,
			file: func(n string) bool { return strings.HasPrefix(n, "links-") }, left: leftSnapshotTmp},
	}
	compactionWindows = []crashWindow{
		{name: "new first index being recorded (meta.tmp created)", dir: "raft/log", mask: syscall.IN_CREATE,
			file: func(n string) bool { return n == "meta.tmp" }, left: leftMetaTmp},
		{name: "new first index recorded (meta renamed), before segment removal", dir: "raft/log", mask: syscall.IN_MOVED_TO,
			file: func(n string) bool { return n == "meta" }, left: leftMetaTmp},
		// Moved aside into raft/log/retained, rather than deleted, when a
		// partition's reference still names an entry in it
		// (--partition-storage=raft-log).
		{name: "first covered segment file deleted", dir: "raft/log", mask: syscall.IN_DELETE | syscall.IN_MOVED_FROM,
			file: func(n string) bool { return strings.HasSuffix(n, ".seg") }, left: leftMetaTmp},
	}
)

// unfinishedSnapshots lists the snapshot directories under a temporary
// name and the staged segment links (a node removes those a crash left
// when it starts).
func unfinishedSnapshots(dataDir string) []string {
	var out []string
	if es, err := os.ReadDir(filepath.Join(dataDir, "raft/snapshots")); err == nil {
		for _, e := range es {
			if strings.HasSuffix(e.Name(), ".tmp") {
				out = append(out, "raft/snapshots/"+e.Name())
			}
		}
	}
	if es, err := os.ReadDir(filepath.Join(dataDir, "raft/snapshot-links")); err == nil {
		for _, e := range es {
			out = append(out, "raft/snapshot-links/"+e.Name())
		}
	}
	return out
}

func leftSnapshotTmp(dataDir string) string {
	out := unfinishedSnapshots(dataDir)
	if _, err := os.Stat(filepath.Join(dataDir, "fsm/checkpoint.tmp")); err == nil {
		out = append(out, "fsm/checkpoint.tmp")
	}
	if len(out) == 0 {
		return "no unfinished file left"
	}
	return "left " + strings.Join(out, ", ")
}

func leftMetaTmp(dataDir string) string {
	segs := 0
	es, _ := os.ReadDir(filepath.Join(dataDir, "raft/log"))
	tmp := false
	for _, e := range es {
		if e.Name() == "meta.tmp" {
			tmp = true
		} else if strings.HasSuffix(e.Name(), ".seg") {
			segs++
		}
	}
	if tmp {
		return fmt.Sprintf("left raft/log/meta.tmp, %d segment files", segs)
	}
	return fmt.Sprintf("meta in place, %d segment files", segs)
}

// crashIn kills node nd inside window w: it watches the directory, asks
// the node for snapshots until the step happens (limit), and kills it then.
// It returns what the kill left behind.
func (c *cluster) crashIn(nd *node, w crashWindow, limit time.Duration) (string, error) {
	dir := filepath.Join(nd.dataDir, w.dir)
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		return "", err
	}
	f := os.NewFile(uintptr(fd), "inotify "+dir) // non-blocking: reads honour deadlines
	defer f.Close()
	if _, err := syscall.InotifyAddWatch(fd, dir, w.mask); err != nil {
		return "", fmt.Errorf("inotify on %s: %w", dir, err)
	}
	nd.mu.Lock()
	pid := nd.cmd.Process.Pid
	nd.killing = true
	ch := nd.exited
	nd.mu.Unlock()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	askDone := make(chan struct{})
	go func() { // asks for snapshots until the kill (or the limit)
		defer close(askDone)
		cl := &http.Client{Timeout: 30 * time.Second}
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+nd.admin+"/v1/snapshot", nil)
			if resp, err := cl.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond): // new entries for the next snapshot to compact
			}
		}
	}()

	deadline := time.Now().Add(limit)
	if err := f.SetReadDeadline(deadline); err != nil {
		return "", err
	}
	buf := make([]byte, 64<<10)
	hit := ""
	for hit == "" {
		n, err := f.Read(buf)
		if err != nil {
			cancel()
			<-askDone
			if errors.Is(err, os.ErrDeadlineExceeded) {
				nd.mu.Lock()
				nd.killing = false
				nd.mu.Unlock()
				return "", fmt.Errorf("node %d: no %q within %v", nd.id, w.name, limit)
			}
			return "", err
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := strings.TrimRight(string(buf[off+syscall.SizeofInotifyEvent:off+syscall.SizeofInotifyEvent+int(ev.Len)]), "\x00")
			off += syscall.SizeofInotifyEvent + int(ev.Len)
			if ev.Mask&w.mask != 0 && w.file(name) {
				hit = name
				_ = syscall.Kill(pid, syscall.SIGKILL)
				break
			}
		}
	}
	<-ch
	cancel()
	<-askDone
	return w.left(nd.dataDir), nil
}
