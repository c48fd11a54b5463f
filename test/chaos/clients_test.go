//go:build chaos && linux

package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The clients a group member can be (-clients, CHAOS_CLIENTS): franz-go in
// this process, or a consumer program of test/clients in a process of its
// own: Apache Kafka's Java client or librdkafka (confluent-kafka-python).
const (
	franzGo    = "franz-go"
	javaClient = "java"
	librdkafka = "librdkafka"
)

// parseClients turns "franz-go,java,librdkafka" into one client per group
// member; "" is three franz-go members.
func parseClients(s string) ([]string, error) {
	if s == "" {
		return []string{franzGo, franzGo, franzGo}, nil
	}
	var out []string
	for _, k := range strings.Split(s, ",") {
		k = strings.TrimSpace(k)
		switch k {
		case franzGo, javaClient, librdkafka:
			out = append(out, k)
		default:
			return nil, fmt.Errorf("unknown client %q (clients: %s, %s, %s)", k, franzGo, javaClient, librdkafka)
		}
	}
	return out, nil
}

// programArgv is the command that runs a consumer program, or why it cannot
// run here. Its temporary files go to tmp.
func programArgv(kind, tmp string) ([]string, error) {
	clients, err := filepath.Abs(filepath.Join("..", "clients"))
	if err != nil {
		return nil, err
	}
	switch kind {
	case javaClient:
		jar := filepath.Join(clients, "java", "target", "kgate-e2e-java.jar")
		if _, err := os.Stat(jar); err != nil {
			return nil, fmt.Errorf("the Java client jar (./scripts/install-test-deps.sh builds it): %w", err)
		}
		// The coordinator's account of the member's session (heartbeat
		// and join errors, generation resets) at INFO, on stderr: it says
		// why a member lost its partitions. With KGATE_CHAOS_CLIENT_DEBUG
		// set, at DEBUG with the network client's: each coordinator
		// lookup, the broker it went to and its answer, and each
		// disconnect.
		level, network := "info", []string(nil)
		if os.Getenv("KGATE_CHAOS_CLIENT_DEBUG") != "" {
			level, network = "debug", []string{"-Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients.NetworkClient=debug"}
		}
		// java.io.tmpdir: snappy-java unpacks its native library there and
		// a killed JVM never removes it.
		return append(append([]string{"java", "-Djava.io.tmpdir=" + tmp, "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients.consumer.internals=" + level}, network...),
			"-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS", "-cp", jar, "kgate.e2e.ClusterConsumer"), nil
	case librdkafka:
		// Debian's python3, for which install-test-deps.sh installs
		// python3-confluent-kafka.
		py := "/usr/bin/python3"
		if out, err := exec.Command(py, "-c", "import confluent_kafka").CombinedOutput(); err != nil {
			return nil, fmt.Errorf("confluent-kafka-python (./scripts/install-test-deps.sh installs it): %v: %s", err, out)
		}
		return []string{py, filepath.Join(clients, "confluent-kafka-python", "cluster_consumer.py")}, nil
	}
	return nil, fmt.Errorf("client %q is not a program", kind)
}

// programEvent is one line of a consumer program's stdout (the protocol is
// described in test/clients/confluent-kafka-python/cluster_consumer.py).
type programEvent struct {
	Event      string  `json:"event"`
	Partitions []int32 `json:"partitions"`
	Generation *int32  `json:"generation"` // at a rebalance event; absent or -1: unknown
	Offsets    []struct {
		P int32 `json:"p"`
		O int64 `json:"o"`
	} `json:"offsets"` // committed
	Records []struct {
		P int32  `json:"p"`
		O int64  `json:"o"`
		V string `json:"v"`
		T int64  `json:"t"` // the record's timestamp, unix ms
	} `json:"records"`
	Where   string `json:"where"`
	Code    int    `json:"code"`
	Name    string `json:"name"`
	Message string `json:"message"`
	// Last line.
	OK    *bool  `json:"ok"`
	Error string `json:"error"`
}

// consumeProgram is group member i run by a consumer program: it reads the
// program's events into the History as consumeGroup does for franz-go (an
// epoch per assigned, revoked or lost event), and closes the program's
// stdin (the program then closes its consumer) when the workload stops.
// The programs commit by themselves what they handed to the application.
func (w *workload) consumeProgram(i int, kind string, argv []string) {
	defer w.readWG.Done()
	name := fmt.Sprintf("c%d", i)
	w.mu.Lock()
	seeds := strings.Join(w.seeds, ",")
	w.mu.Unlock()
	// The franz-go members' session timeout and their only assignor
	// (franz-go's default): a group whose members share no assignor is
	// refused with INCONSISTENT_GROUP_PROTOCOL, as Kafka refuses it, and
	// librdkafka's default is range,roundrobin.
	args := append(append([]string(nil), argv...), seeds, topic, "group-consume", group, name,
		"session=10000", "assignor=cooperative-sticky")
	cmd := exec.Command(args[0], args[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	errLog, err := os.Create(filepath.Join(w.logDir, "client-"+name+"-"+kind+".log"))
	if err != nil {
		w.t.Error(err)
		return
	}
	defer errLog.Close()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		w.t.Error(err)
		return
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		w.t.Error(err)
		return
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		w.t.Error(err)
		return
	}
	if err := cmd.Start(); err != nil {
		w.t.Errorf("member %s: starting %s: %v", name, strings.Join(args, " "), err)
		return
	}

	// why is what the member last said went wrong: its last error event,
	// and the last line of its client's log that reports a failure.
	var whyMu sync.Mutex
	var lastErrEvent, lastLogErr string
	why := func() string {
		whyMu.Lock()
		defer whyMu.Unlock()
		s := kind + ": error event: " + lastErrEvent + "; log: " + lastLogErr
		lastErrEvent, lastLogErr = "", ""
		return s
	}

	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(errLog, line)
			if l := strings.ToLower(line); strings.Contains(l, "fail") || strings.Contains(l, "error") ||
				strings.Contains(l, "timed out") || strings.Contains(l, "could not be established") ||
				strings.Contains(l, "disconnect") {
				whyMu.Lock()
				lastLogErr = line
				whyMu.Unlock()
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	var result *programEvent
	go func() {
		defer readers.Done()
		epoch := 0
		held := map[int32]bool{}
		// assignment records what the member holds after a rebalance
		// event. The programs name no coordinator (their clients do not
		// tell which node answered the SyncGroup).
		assignment := func(e programEvent) {
			switch e.Event {
			case "assigned":
				for _, p := range e.Partitions {
					held[p] = true
				}
			case "revoked":
				for _, p := range e.Partitions {
					delete(held, p)
				}
			case "lost":
				clear(held)
			}
			gen := int32(-1)
			if e.Generation != nil {
				gen = *e.Generation
			}
			w.h.AddAssignment(Assignment{Member: name, Event: e.Event, Generation: gen, Partitions: heldList(held), At: time.Now()})
		}
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			var e programEvent
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				w.t.Errorf("member %s (%s): unparsable output line %q", name, kind, sc.Bytes())
				continue
			}
			if e.Event != "records" {
				// The member's events, with the client's own log.
				fmt.Fprintf(errLog, "%s event: %s\n", time.Now().Format("15:04:05.000"), sc.Bytes())
			}
			switch e.Event {
			case "assigned", "revoked":
				epoch++
				assignment(e)
			case "lost":
				epoch++
				assignment(e)
				if len(e.Partitions) > 0 {
					w.lost.Add(1)
					f := w.faultNow.Load()
					reason := name + ": " + why()
					w.mu.Lock()
					w.lostBy[f]++
					w.lostWhy[f] = append(w.lostWhy[f], reason)
					w.mu.Unlock()
				}
			case "records":
				now := time.Now()
				for _, r := range e.Records {
					w.h.AddRead(Read{Reader: name, Epoch: epoch, Group: true, Partition: r.P, Offset: r.O, Value: r.V, At: now})
					storeMax(&w.lastRead[i], time.UnixMilli(r.T))
				}
			case "error":
				whyMu.Lock()
				lastErrEvent = fmt.Sprintf("%s %s (code %d): %s", e.Where, e.Name, e.Code, e.Message)
				whyMu.Unlock()
			case "committed":
				now := time.Now()
				for _, o := range e.Offsets {
					w.h.AddClientCommit(ClientCommit{Member: name, Partition: o.P, Offset: o.O, At: now})
				}
			case "closing":
			default:
				if e.OK != nil {
					r := e
					result = &r
				}
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		readers.Wait()
	}()

	select {
	case <-w.ctx.Done():
	case <-exited:
		w.t.Errorf("member %s (%s) exited while the workload ran (result %+v); its log is %s", name, kind, result, errLog.Name())
	}
	stdin.Close()
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		w.t.Errorf("member %s (%s) did not exit within 30 s of its stdin closing", name, kind)
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	cmd.Wait()
	if result != nil && !*result.OK {
		w.t.Errorf("member %s (%s) failed: %s", name, kind, result.Error)
	}
}
