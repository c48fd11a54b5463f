package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// consumerProgram is a group consumer run as a separate program
// (-consumer-cmd), for clients other than franz-go: the programs in
// test/clients (Java's kgate.e2e.ClusterConsumer, confluent-kafka-python's
// cluster_consumer.py) take BOOTSTRAP TOPIC group-consume GROUP CLIENT_ID
// key=value... and print one JSON event per line.
type consumerProgram struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}

	mu        sync.Mutex
	rebalance int // assigned, revoked and lost events so far
}

type programEvent struct {
	Event      string  `json:"event"`
	Partitions []int32 `json:"partitions"`
	Records    []struct {
		P int32  `json:"p"`
		V string `json:"v"`
	} `json:"records"`
	Where   string `json:"where"`
	Name    string `json:"name"`
	Message string `json:"message"`
}

// startProgram starts consumer i as a program.
func (f *failover) startProgram(i int) (*consumerProgram, error) {
	argv := strings.Fields(f.cfg.consumerCmd)
	assignor := "assignor=default"
	if f.cfg.balancer == "cooperative-sticky" {
		assignor = "assignor=cooperative-sticky"
	}
	argv = append(argv, strings.Join(f.cfg.brokers, ","), f.topic, "group-consume", f.group,
		fmt.Sprintf("kgate-bench-%d", i),
		"session="+strconv.FormatInt(f.cfg.session.Milliseconds(), 10),
		"heartbeat="+strconv.FormatInt(f.cfg.heartbeat.Milliseconds(), 10),
		"commit="+strconv.FormatInt(f.cfg.commitInterval.Milliseconds(), 10), assignor)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = f.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &consumerProgram{cmd: cmd, done: make(chan struct{})}
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", strings.Join(argv, " "), err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			var e programEvent
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				continue
			}
			f.onProgramEvent(i, p, e)
		}
		io.Copy(io.Discard, stdout)
		cmd.Wait()
	}()
	return p, nil
}

func (f *failover) onProgramEvent(i int, p *consumerProgram, e programEvent) {
	now := time.Now()
	switch e.Event {
	case "records":
		f.mu.Lock()
		for _, r := range e.Records {
			f.onRecordLocked(i, r.V, now)
		}
		f.mu.Unlock()
	case "assigned", "revoked", "lost":
		p.mu.Lock()
		p.rebalance++
		p.mu.Unlock()
		m := map[string][]int32{f.topic: e.Partitions}
		if e.Event == "assigned" {
			f.onAssigned(i, m)
		} else {
			f.onRevoked(i, m, e.Event == "lost")
		}
	case "error":
		f.mu.Lock()
		f.fetchErr[e.Where+": "+e.Name]++
		f.mu.Unlock()
	case "session-timeout":
		// librdkafka ended the session on its own clock, not on an
		// answer: client behaviour, reported apart as franz-go's are.
		f.mu.Lock()
		if f.counting {
			f.sessionErrs["librdkafka: session timed out on the client's clock"]++
		}
		f.mu.Unlock()
	}
}

// rebalances is the program's count of rebalance events.
func (p *consumerProgram) rebalances() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rebalance
}

// stop closes the program's stdin (it leaves the group and exits) and
// kills it if it has not exited within timeout.
func (p *consumerProgram) stop(timeout time.Duration) {
	p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(timeout):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}
