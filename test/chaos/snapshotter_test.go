//go:build chaos && linux

package chaos

import (
	"context"
	"flag"
	"net/http"
	"strings"
	"sync"
	"time"
)

var (
	// Extra `kgate serve` flags for every node, e.g. "--raft-snapshot-threshold 128".
	nodeFlagsFlag = flag.String("node-flags", "", "extra kgate serve flags for every node, space-separated")
	// Raft checks its entry-count threshold only every 2-4 minutes, and
	// the chaos workload never reaches the 256 MiB size trigger, so a run
	// of a few minutes takes few snapshots. This asks every node for one
	// (GET /v1/snapshot, as the crash-snapshot fault does) at this pace:
	// snapshots, their installs and restarts on them become common.
	snapshotEveryFlag = flag.Duration("snapshot-every", 0, "ask every node for a Raft snapshot at this interval (0: never)")
)

// extraNodeFlags splits -node-flags.
func extraNodeFlags() []string { return strings.Fields(*nodeFlagsFlag) }

// snapshotter asks the members for snapshots every interval until stopped.
type snapshotter struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	admins []string // the members' admin addresses, set by the campaign's goroutine
}

func (s *snapshotter) setAdmins(addrs []string) {
	s.mu.Lock()
	s.admins = append([]string(nil), addrs...)
	s.mu.Unlock()
}

// startSnapshotter starts asking; its stop ends the goroutine and waits.
func startSnapshotter(every time.Duration, admins []string) *snapshotter {
	ctx, cancel := context.WithCancel(context.Background())
	s := &snapshotter{cancel: cancel}
	s.setAdmins(admins)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		cl := &http.Client{Timeout: 10 * time.Second}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			s.mu.Lock()
			admins := s.admins
			s.mu.Unlock()
			for _, a := range admins {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a+"/v1/snapshot", nil)
				// The snapshot is taken before the answer starts; its
				// body (the whole expanded stream) is not read.
				if resp, err := cl.Do(req); err == nil {
					resp.Body.Close()
				}
			}
		}
	}()
	return s
}

func (s *snapshotter) stop() {
	if s == nil {
		return
	}
	s.cancel()
	s.wg.Wait()
}

func (c *cluster) adminAddrs() []string {
	var out []string
	for _, nd := range c.nodes {
		out = append(out, nd.admin)
	}
	return out
}
