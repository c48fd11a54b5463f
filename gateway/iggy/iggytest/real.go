package iggytest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
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

	addr    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
}

// StartReal starts bin with its data and log under dir and waits until it
// accepts TCP connections.
func StartReal(bin, dir string) (*RealServer, error) {
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
	r := &RealServer{Username: user, Password: pass, addr: addr, logPath: filepath.Join(dir, "iggy-server.log"),
		done: make(chan struct{})}
	logf, err := os.Create(r.logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"IGGY_ROOT_USERNAME="+user, "IGGY_ROOT_PASSWORD="+pass,
		"IGGY_TCP_ADDRESS="+addr, "IGGY_SYSTEM_PATH="+filepath.Join(dir, "data"),
		"IGGY_HTTP_ENABLED=false", "IGGY_QUIC_ENABLED=false", "IGGY_WEBSOCKET_ENABLED=false")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	r.cmd = cmd
	go func() { cmd.Wait(); close(r.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return r, nil
		}
		select {
		case <-r.done:
			return nil, fmt.Errorf("%s exited during start-up:\n%s", bin, r.LogTail(30))
		default:
		}
		if time.Now().After(deadline) {
			r.Close()
			return nil, fmt.Errorf("%s not listening on %s after 30s:\n%s", bin, addr, r.LogTail(30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Addr is the server's TCP address.
func (r *RealServer) Addr() string { return r.addr }

// Close stops the server (SIGTERM, then SIGKILL after 10 s).
func (r *RealServer) Close() error {
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
