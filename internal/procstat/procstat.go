// Package procstat reads a process's CPU time from /proc (Linux): what the
// benchmarks compare, for kgate's nodes and for the servers beside them.
package procstat

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat CPU times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// CPU returns the user plus system time pid ("self" for this process) has
// used so far, from /proc/<pid>/stat.
func CPU(pid string) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, err
	}
	ticks, err := ParseTicks(b)
	if err != nil {
		return 0, fmt.Errorf("/proc/%s/stat: %w", pid, err)
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// ParseTicks returns utime+stime (fields 14 and 15) of a stat line. The
// command name (field 2) may hold spaces and parentheses, so fields are
// counted from the last ')'.
func ParseTicks(b []byte) (uint64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return 0, errors.New("too few fields")
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return utime + stime, nil
}

// WriteBytes returns write_bytes of /proc/<pid>/io: the bytes pid (all its
// threads, living and exited) has caused to be sent to the storage layer,
// counted when it dirties a page, so a write later synced or not counts
// alike. Reading another process's needs ptrace-read access (same user).
func WriteBytes(pid string) (int64, error) {
	b, err := os.ReadFile("/proc/" + pid + "/io")
	if err != nil {
		return 0, err
	}
	return field(b, "write_bytes:", "", "/proc/"+pid+"/io")
}

// PeakRSS returns VmHWM of /proc/<pid>/status in bytes: the highest
// resident set size pid has had.
func PeakRSS(pid string) (int64, error) { return statusBytes(pid, "VmHWM:") }

// RSS returns VmRSS of /proc/<pid>/status in bytes: the resident set size
// now.
func RSS(pid string) (int64, error) { return statusBytes(pid, "VmRSS:") }

func statusBytes(pid, key string) (int64, error) {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, err
	}
	kb, err := field(b, key, "kB", "/proc/"+pid+"/status")
	return kb << 10, err
}

// field returns the number after the line prefix key in b, which must be
// followed by unit when unit is not empty.
func field(b []byte, key, unit, file string) (int64, error) {
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, key)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 1+min(len(unit), 1) || (unit != "" && f[1] != unit) {
			return 0, fmt.Errorf("%s: malformed %q", file, strings.TrimSpace(line))
		}
		return strconv.ParseInt(f[0], 10, 64)
	}
	return 0, fmt.Errorf("%s: no %s", file, strings.TrimSuffix(key, ":"))
}
