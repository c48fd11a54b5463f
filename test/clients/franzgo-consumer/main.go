// Command franzgo-consumer is the franz-go (kgo) consumer-group member used
// by the group tests in test/e2e. It runs as its own process so that a test
// can kill it with SIGKILL. See test/clients/GROUPS.md for the command line,
// the options and the JSON lines it prints.
//
//	franzgo-consumer BOOTSTRAP TOPIC group GROUP CLIENT_ID [key=value ...]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxLifetime bounds the program in case the test driving it goes away
// without closing stdin.
const maxLifetime = 3 * time.Minute

var outMu sync.Mutex

// emit prints one JSON line on stdout.
func emit(v map[string]any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(fmt.Sprintf(`{"event":"error","error":%q}`, err.Error()))
	}
	outMu.Lock()
	defer outMu.Unlock()
	os.Stdout.Write(append(b, '\n'))
}

type options struct {
	bootstrap, topic, group, clientID string
	assignor                          string // "" (client default) or "range"
	instance                          string
	session                           time.Duration
	stopAt                            int64 // process only offsets below this; -1: all
}

func parse(args []string) (*options, error) {
	if len(args) < 5 || args[2] != "group" {
		return nil, errors.New("usage: franzgo-consumer BOOTSTRAP TOPIC group GROUP CLIENT_ID [assignor=range] [instance=ID] [session=MS] [stopat=N]")
	}
	o := &options{bootstrap: args[0], topic: args[1], group: args[3], clientID: args[4], session: 6 * time.Second, stopAt: -1}
	for _, kv := range args[5:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("option %q is not key=value", kv)
		}
		switch k {
		case "assignor":
			if v != "range" && v != "default" {
				return nil, fmt.Errorf("assignor %q: want range or default", v)
			}
			if v == "range" {
				o.assignor = v
			}
		case "instance":
			o.instance = v
		case "session":
			ms, err := strconv.Atoi(v)
			if err != nil {
				return nil, fmt.Errorf("session: %v", err)
			}
			o.session = time.Duration(ms) * time.Millisecond
		case "stopat":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("stopat: %v", err)
			}
			o.stopAt = n
		default:
			return nil, fmt.Errorf("unknown option %q", k)
		}
	}
	return o, nil
}

func main() {
	start := time.Now()
	result := map[string]any{"client": "franz-go", "mode": "group"}
	err := run(os.Args[1:], result)
	result["ok"] = err == nil
	if err != nil {
		result["error"] = err.Error()
	}
	result["elapsed_ms"] = time.Since(start).Milliseconds()
	emit(result)
	if err != nil {
		os.Exit(1)
	}
}

func run(args []string, result map[string]any) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	// assigned is this member's whole assignment of o.topic; the callbacks
	// run serially, and only while no poll is being processed
	// (BlockRebalanceOnPoll).
	assigned := map[int32]bool{}
	report := func(cl *kgo.Client) {
		member, gen := cl.GroupMetadata()
		emit(map[string]any{"event": "assigned", "partitions": sortedKeys(assigned), "generation": gen, "member_id": member})
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(o.bootstrap),
		kgo.ClientID(o.clientID),
		kgo.ConsumerGroup(o.group),
		kgo.ConsumeTopics(o.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(o.session),
		kgo.HeartbeatInterval(500 * time.Millisecond),
		kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, m map[string][]int32) {
			for _, p := range m[o.topic] {
				assigned[p] = true
			}
			report(cl)
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, cl *kgo.Client, m map[string][]int32) {
			if len(m[o.topic]) == 0 {
				return
			}
			for _, p := range m[o.topic] {
				delete(assigned, p)
			}
			emit(map[string]any{"event": "revoked", "partitions": sorted(m[o.topic])})
		}),
		kgo.OnPartitionsLost(func(_ context.Context, cl *kgo.Client, m map[string][]int32) {
			if len(m[o.topic]) == 0 {
				return
			}
			for _, p := range m[o.topic] {
				delete(assigned, p)
			}
			emit(map[string]any{"event": "lost", "partitions": sorted(m[o.topic])})
		}),
	}
	if o.assignor == "range" {
		opts = append(opts, kgo.Balancers(kgo.RangeBalancer()))
	}
	if o.instance != "" {
		opts = append(opts, kgo.InstanceID(o.instance))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}

	// Any line on stdin (or its end) asks for a clean close.
	ctx, cancel := context.WithTimeout(context.Background(), maxLifetime)
	defer cancel()
	closeAsked := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "close" {
				break
			}
		}
		close(closeAsked)
		cancel()
	}()

	records := 0
	for {
		fs := cl.PollFetches(ctx)
		select {
		case <-closeAsked:
			cl.AllowRebalance()
			cl.Close() // leaves the group unless it has an instance id
			result["records"] = records
			return nil
		default:
		}
		if ctx.Err() != nil {
			cl.Close()
			return fmt.Errorf("no close request within %v", maxLifetime)
		}
		fs.EachError(func(t string, p int32, err error) {
			emit(map[string]any{"event": "error", "error": fmt.Sprintf("fetch %s[%d]: %v", t, p, err)})
		})
		commit := map[string]map[int32]kgo.EpochOffset{}
		fs.EachRecord(func(r *kgo.Record) {
			if o.stopAt >= 0 && r.Offset >= o.stopAt {
				return
			}
			records++
			emit(map[string]any{"event": "record", "p": r.Partition, "o": r.Offset, "k": string(r.Key)})
			if commit[r.Topic] == nil {
				commit[r.Topic] = map[int32]kgo.EpochOffset{}
			}
			commit[r.Topic][r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
		})
		if len(commit) > 0 {
			var cerr error
			cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
			cl.CommitOffsetsSync(cctx, commit, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
				if err == nil {
					err = commitErr(resp)
				}
				cerr = err
			})
			ccancel()
			if cerr != nil {
				emit(map[string]any{"event": "commit_error", "error": cerr.Error()})
			} else {
				offs := map[string]int64{}
				for p, eo := range commit[o.topic] {
					offs[strconv.Itoa(int(p))] = eo.Offset
				}
				emit(map[string]any{"event": "commit", "offsets": offs})
			}
		}
		cl.AllowRebalance()
	}
}

func sortedKeys(m map[int32]bool) []int32 {
	out := make([]int32, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

func sorted(ps []int32) []int32 {
	out := slices.Clone(ps)
	slices.Sort(out)
	return out
}

// commitErr is the first partition error of an OffsetCommit response.
func commitErr(resp *kmsg.OffsetCommitResponse) error {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("commit %s[%d]: %w", t.Topic, p.Partition, err)
			}
		}
	}
	return nil
}
