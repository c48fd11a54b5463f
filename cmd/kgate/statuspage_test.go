package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// browser starts headless Chromium (Debian's chromium, installed by
// `make deps`) for the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Fatal("no chromium on PATH: run `make deps` (scripts/install-test-deps.sh installs Debian's chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 1000), chromedp.UserDataDir(t.TempDir()),
		// Chromium's own temporary directories, left in /tmp otherwise.
		chromedp.Env("TMPDIR="+t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start %s: %v", path, err)
	}
	return ctx
}

// pageText polls the text of selector until want accepts it (every 100 ms,
// up to limit) and returns it.
func pageText(t *testing.T, ctx context.Context, selector string, limit time.Duration, want func(string) bool) string {
	t.Helper()
	var got string
	eventually(t, limit, func() string {
		js := fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ""`, selector)
		var err error
		if got, err = chromedp.Run(ctx, chromedp.Evaluate[string](js)); err != nil {
			return fmt.Sprintf("evaluate %s: %v", selector, err)
		}
		if !want(got) {
			return fmt.Sprintf("%s shows %q", selector, got)
		}
		return ""
	})
	return got
}

// TestStatusPage opens the status page of a follower in headless Chromium:
// it shows the leader, a consumer group that appears later (with its lag),
// and the new leader after the old one stops.
func TestStatusPage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes)
	var viewer *testNodeAddrs
	for _, n := range nodes {
		if n.id != leader {
			viewer = n
			break
		}
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap(nodes)...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 3, -1, nil, "payments"); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	for p := int32(0); p < 3; p++ {
		produceTo(ctx, t, cl, "payments", p, 4+int(p))
	}

	page := browser(t)
	if err := chromedp.Do(page, chromedp.Navigate(viewer.admin+"/")); err != nil {
		t.Fatalf("open %s/: %v", viewer.admin, err)
	}
	// The leader as the cluster says now: a leader may step down under a
	// loaded machine's pauses between the two looks.
	pageText(t, page, "#leader", 10*time.Second, func(s string) bool { return s == fmt.Sprintf("node %d", waitLeader(t, nodes)) })
	pageText(t, page, "#nodes-alive", 10*time.Second, func(s string) bool { return s == "3 / 3" })
	pageText(t, page, `[data-topic="payments"]`, 10*time.Second, func(s string) bool { return s != "" })

	// A group that starts after the page loaded shows up, Stable, with the
	// lag of what it has not committed: 4+5+6 records, 3 committed.
	cons, err := kgo.NewClient(kgo.SeedBrokers(bootstrap(nodes)...), kgo.ClientID("ledger-writer"),
		kgo.ConsumerGroup("ledger"), kgo.ConsumeTopics("payments"), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for got := 0; got < 15; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 15", got)
		}
		got += len(fs.Records())
	}
	var commitErr error
	cons.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{"payments": {0: {Epoch: -1, Offset: 3}}},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, _ *kmsg.OffsetCommitResponse, err error) {
			commitErr = err
		})
	if commitErr != nil {
		t.Fatalf("commit: %v", commitErr)
	}
	row := pageText(t, page, `[data-group="ledger"]`, 10*time.Second, func(s string) bool {
		return s != "" && strings.Contains(s, "Stable") && strings.Contains(s, "ledger-writer")
	})
	t.Logf("group row: %q", row)
	pageText(t, page, "#total-lag", 10*time.Second, func(s string) bool { return s == "1" })

	shot := os.Getenv("KGATE_STATUS_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "status.png")
	}
	png, err := chromedp.Run(page, chromedp.FullScreenshot(100)) // quality 100: PNG
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}

	// The leader stops (handing leadership over); the page follows. On a
	// loaded machine leadership may have moved to the viewer meanwhile: the
	// page is then opened on another follower first, since the stopped
	// node would take the page down with it.
	leader = waitLeader(t, nodes)
	if leader == viewer.id {
		for _, n := range nodes {
			if n.id != leader {
				viewer = n
				break
			}
		}
		if err := chromedp.Do(page, chromedp.Navigate(viewer.admin+"/")); err != nil {
			t.Fatalf("open %s/: %v", viewer.admin, err)
		}
		pageText(t, page, "#leader", 10*time.Second, func(s string) bool { return s == fmt.Sprintf("node %d", leader) })
	}
	for _, n := range nodes {
		if n.id == leader {
			n.stop()
		}
	}
	next := pageText(t, page, "#leader", 15*time.Second, func(s string) bool {
		return s != fmt.Sprintf("node %d", leader) && s != "none" && s != "…"
	})
	t.Logf("leader node %d stopped; page shows %s", leader, next)
	pageText(t, page, `#nodes tr[data-node] .role-leader`, 10*time.Second, func(s string) bool { return s == "leader" })
}
