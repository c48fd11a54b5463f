package iggytest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kgate/kgate/gateway/iggy"
	"github.com/kgate/kgate/internal/procstat"
)

// EnvServerBin names a real iggy-server binary. When it is set, the Iggy
// suites also run against that server (the real-server tier); when it is
// not, they say so.
const EnvServerBin = "IGGY_SERVER_BIN"

// RealServer is an iggy-server process started for a test on a fresh data
// directory, with root credentials from IGGY_ROOT_USERNAME /
// IGGY_ROOT_PASSWORD (default iggy / iggy).
type RealServer struct {
	Username, Password string

	bin, dir string
	env      []string
	addr     string
	logPath  string
	cmd      *exec.Cmd
	done     chan struct{} // closed when cmd has exited
	// startRetries counts starts retried after the server's start-up
	// panic (startupPanic).
	startRetries int
}

// StartReal starts bin with its data and log under dir and waits until it
// accepts logins. env adds server settings (IGGY_...=value).
func StartReal(bin, dir string, env ...string) (*RealServer, error) {
	user, pass := os.Getenv("IGGY_ROOT_USERNAME"), os.Getenv("IGGY_ROOT_PASSWORD")
	if user == "" || pass == "" {
		user, pass = "iggy", "iggy"
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	r := &RealServer{Username: user, Password: pass, bin: bin, dir: dir, addr: addr, env: env,
		logPath: filepath.Join(dir, "iggy-server.log")}
	if err := r.start(); err != nil {
		return nil, err
	}
	return r, nil
}

// DataDir is the server's data directory (IGGY_SYSTEM_PATH).
func (r *RealServer) DataDir() string { return filepath.Join(r.dir, "data") }

func (r *RealServer) start() error {
	logf, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(r.bin)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(),
		"IGGY_ROOT_USERNAME="+r.Username, "IGGY_ROOT_PASSWORD="+r.Password,
		"IGGY_TCP_ADDRESS="+r.addr, "IGGY_SYSTEM_PATH="+r.DataDir(),
		"IGGY_HTTP_ENABLED=false", "IGGY_QUIC_ENABLED=false", "IGGY_WEBSOCKET_ENABLED=false")
	cmd.Env = append(cmd.Env, r.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", r.bin, err)
	}
	done := make(chan struct{})
	r.cmd, r.done = cmd, done
	go func() { cmd.Wait(); close(done) }()
	// Ready means a login succeeds: a restarted server accepts TCP
	// connections before it has loaded its data, and resets them.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c, err := iggy.Dial(ctx, iggy.Options{Addr: r.addr, Username: r.Username, Password: r.Password})
		cancel()
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-done:
			if tail := r.LogTail(30); strings.Contains(tail, startupPanic) && r.startRetries < maxStartRetries {
				// A server defect, not kgate's: retry the start.
				r.startRetries++
				return r.start()
			}
			return fmt.Errorf("%s exited during start-up:\n%s", r.bin, r.LogTail(30))
		default:
		}
		if time.Now().After(deadline) {
			r.Close()
			return fmt.Errorf("%s not accepting logins on %s after 30s (%v):\n%s", r.bin, r.addr, err, r.LogTail(30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startupPanic is what iggy-server 0.9.0-edge.5 logs when one of its shards
// reads its metadata before it was published and the server exits at
// start-up, a race inside the server seen on loaded machines (three times
// in a row once); start tries again up to maxStartRetries times.
const (
	startupPanic    = "metadata not initialized"
	maxStartRetries = 3
)

// Kill stops the server with SIGKILL, as a crash would: nothing is
// flushed or closed cleanly.
func (r *RealServer) Kill() {
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	<-r.done
}

// Restart starts the server again on the same address and data directory
// after Kill or Close; with empty set, the data directory is removed
// first, as if the server came back on a new disk.
func (r *RealServer) Restart(empty bool) error {
	select {
	case <-r.done:
	default:
		return errors.New("iggytest: Restart of a running iggy-server")
	}
	if empty {
		if err := os.RemoveAll(r.DataDir()); err != nil {
			return err
		}
	}
	return r.start()
}

// Addr is the server's TCP address.
func (r *RealServer) Addr() string { return r.addr }

// Close stops the server (SIGTERM, then SIGKILL after 10 s).
func (r *RealServer) Close() error {
	select {
	case <-r.done:
		return nil
	default:
	}
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-r.done:
		return nil
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-r.done
		return errors.New("iggy-server did not stop within 10s of SIGTERM")
	}
}

// LogTail returns the last n lines of the server's log.
func (r *RealServer) LogTail(n int) string {
	f, err := os.Open(r.logPath)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// Version is what bin --version reports ("server 0.8.0" gives "0.8.0").
func Version(bin string) (string, error) {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", bin, err)
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return "", fmt.Errorf("%s --version printed nothing", bin)
	}
	return f[len(f)-1], nil
}

// StartRealDurable starts bin like StartReal, set up so that an
// acknowledged message survives a kill -9 of the server: by default Iggy
// holds up to 1,024 acknowledged messages (or 1 MiB) of a partition in
// memory before writing them. A 0.7/0.8 server takes that as a server
// setting, given here; a 0.9 server takes it per topic at CreateTopic
// (iggy.TopicConfig.MessagesRequiredToSave, kgate's
// --iggy-messages-required-to-save) and refuses the server setting.
func StartRealDurable(bin, dir string) (*RealServer, error) {
	v, err := Version(bin)
	if err != nil {
		return nil, err
	}
	var env []string
	if strings.HasPrefix(v, "0.7.") || strings.HasPrefix(v, "0.8.") {
		env = []string{"IGGY_SYSTEM_PARTITION_MESSAGES_REQUIRED_TO_SAVE=1"}
	}
	return StartReal(bin, dir, env...)
}

// CPUTime is the CPU time (user and system) the server process has used
// so far: what benchmarks compare per gigabyte served.
func (r *RealServer) CPUTime() (time.Duration, error) {
	return procstat.CPU(strconv.Itoa(r.cmd.Process.Pid))
}
