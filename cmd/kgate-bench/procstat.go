package main

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

// procCPU is a process's CPU time at an instant.
type procCPU struct {
	cpu time.Duration // user + system
	at  time.Time
}

// readProcCPU reads utime+stime of pid ("self" for this process) from
// /proc/<pid>/stat.
func readProcCPU(pid string) (procCPU, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return procCPU{}, err
	}
	at := time.Now()
	ticks, err := parseStatTicks(b)
	if err != nil {
		return procCPU{}, fmt.Errorf("/proc/%s/stat: %w", pid, err)
	}
	return procCPU{cpu: time.Duration(ticks) * time.Second / clockTicks, at: at}, nil
}

// parseStatTicks returns utime+stime (fields 14 and 15) of a stat line. The
// command name (field 2) may hold spaces and parentheses, so fields are
// counted from the last ')'.
func parseStatTicks(b []byte) (uint64, error) {
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

// cpuPercent is the CPU used between two readings as a percentage of one
// core (200% = two cores busy).
func cpuPercent(a, b procCPU) float64 {
	wall := b.at.Sub(a.at)
	if wall <= 0 {
		return 0
	}
	return 100 * float64(b.cpu-a.cpu) / float64(wall)
}

// readRSS returns the resident set size of pid in bytes.
func readRSS(pid string) (int64, error) {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				break
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("no VmRSS in /proc/" + pid + "/status")
}
