package main

import (
	"strconv"
	"time"

	"github.com/kgate/kgate/internal/procstat"
)

// procCPU is a process's CPU time at an instant.
type procCPU struct {
	cpu time.Duration // user + system
	at  time.Time
}

// readProcCPU reads utime+stime of pid ("self" for this process) from
// /proc/<pid>/stat.
func readProcCPU(pid string) (procCPU, error) {
	cpu, err := procstat.CPU(pid)
	if err != nil {
		return procCPU{}, err
	}
	return procCPU{cpu: cpu, at: time.Now()}, nil
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

// phaseCPU is the CPU time of the servers (-server-pid, summed) and of
// this process at the start of a phase.
type phaseCPU struct {
	pids         []string
	server, self time.Duration
}

// startPhaseCPU reads both CPU times; nil when pids is empty or any cannot
// be read (the phase is then reported without them).
func startPhaseCPU(pids []int) *phaseCPU {
	if len(pids) == 0 {
		return nil
	}
	p := &phaseCPU{}
	for _, pid := range pids {
		p.pids = append(p.pids, strconv.Itoa(pid))
	}
	var err error
	if p.server, err = serversCPU(p.pids); err != nil {
		return nil
	}
	if p.self, err = procstat.CPU("self"); err != nil {
		return nil
	}
	return p
}

func serversCPU(pids []string) (time.Duration, error) {
	var sum time.Duration
	for _, pid := range pids {
		c, err := procstat.CPU(pid)
		if err != nil {
			return 0, err
		}
		sum += c
	}
	return sum, nil
}

// perGB is the CPU seconds the servers and this process used since the
// phase started, per GB (10^9 bytes) of bytes; ok is false when they
// cannot be read.
func (p *phaseCPU) perGB(bytes int64) (server, self float64, ok bool) {
	if p == nil || bytes <= 0 {
		return 0, 0, false
	}
	s, err := serversCPU(p.pids)
	if err != nil {
		return 0, 0, false
	}
	c, err := procstat.CPU("self")
	if err != nil {
		return 0, 0, false
	}
	gb := float64(bytes) / 1e9
	return (s - p.server).Seconds() / gb, (c - p.self).Seconds() / gb, true
}

// phaseDisk is each server's write_bytes at the start of a phase.
type phaseDisk struct {
	pids  []string
	start []int64
}

// startPhaseDisk reads each server's write_bytes; nil when pids is empty
// or any cannot be read.
func startPhaseDisk(pids []int) *phaseDisk {
	if len(pids) == 0 {
		return nil
	}
	p := &phaseDisk{}
	for _, pid := range pids {
		s := strconv.Itoa(pid)
		n, err := procstat.WriteBytes(s)
		if err != nil {
			return nil
		}
		p.pids, p.start = append(p.pids, s), append(p.start, n)
	}
	return p
}

// perByte is each server's growth of write_bytes since the phase started
// divided by bytes; ok is false when any cannot be read.
func (p *phaseDisk) perByte(bytes int64) (each []float64, ok bool) {
	if p == nil || bytes <= 0 {
		return nil, false
	}
	for i, pid := range p.pids {
		n, err := procstat.WriteBytes(pid)
		if err != nil {
			return nil, false
		}
		each = append(each, float64(n-p.start[i])/float64(bytes))
	}
	return each, true
}

// peakRSSMiB is each server's VmHWM in MiB; ok is false when any cannot
// be read.
func peakRSSMiB(pids []int) (each []float64, ok bool) {
	if len(pids) == 0 {
		return nil, false
	}
	for _, pid := range pids {
		n, err := procstat.PeakRSS(strconv.Itoa(pid))
		if err != nil {
			return nil, false
		}
		each = append(each, float64(n)/(1<<20))
	}
	return each, true
}
