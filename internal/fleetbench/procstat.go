package fleetbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat. It
// is 100 on every Linux architecture Go supports; reading it would need cgo.
const clockTicks = 100

// selfCPU is the CPU time (user + system) this process has used: the
// operator and, in the same process, the benchmark's own client, Kyma watch
// and registry. The API servers and etcd are child processes and are not in
// it; processCPU reads those.
func selfCPU() (seconds float64, maxRSSBytes int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return cpu.Seconds(), ru.Maxrss * 1024 // Maxrss is in KiB on Linux
}

// selfRSS is this process's resident memory now; 0 when unreadable.
func selfRSS() int64 {
	data, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	s, err := parseStat(data)
	if err != nil {
		return 0
	}
	return s.rssPages * int64(os.Getpagesize())
}

// memSampler keeps the peak of the Go heap in use and of the memory the Go
// runtime holds from the OS, sampled at an interval: the operator's memory
// figures. runtime.ReadMemStats stops the world for microseconds, so a
// sample a second costs nothing measurable.
type memSampler struct {
	mu            sync.Mutex
	peakHeapInuse uint64
	peakSys       uint64
	lastHeapInuse uint64
}

func (m *memSampler) sample() {
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.peakHeapInuse = max(m.peakHeapInuse, ms.HeapInuse)
	m.peakSys = max(m.peakSys, ms.Sys)
	m.lastHeapInuse = ms.HeapInuse
}

func (m *memSampler) run(ctx context.Context, every time.Duration) {
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		m.sample()
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

func (m *memSampler) peaks() (heapInuse, sys, last uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.peakHeapInuse, m.peakSys, m.lastHeapInuse
}

// childProcess is one control-plane binary the benchmark started, named by
// its cluster and binary, e.g. "kcp/kube-apiserver".
type childProcess struct {
	pid  int
	name string
}

// findChildren lists this process's children whose command line names one
// of the cluster directories (label → directory). testcluster starts every
// binary with its cluster directory in the arguments (data dir, cert dir),
// which is how a child is told apart from anything else the process may
// have started.
func findChildren(clusters map[string]string) ([]childProcess, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	self := os.Getpid()
	var children []childProcess
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		s, err := parseStat(stat)
		if err != nil || s.ppid != self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for label, dir := range clusters {
			if bytes.Contains(cmdline, []byte(dir+string(filepath.Separator))) {
				children = append(children, childProcess{pid: pid, name: label + "/" + s.comm})
				break
			}
		}
	}
	return children, nil
}

// procStat is what the benchmark reads from /proc/<pid>/stat.
type procStat struct {
	comm       string
	ppid       int
	cpuSeconds float64
	rssPages   int64
}

// parseStat parses /proc/<pid>/stat. The command name is in parentheses and
// may itself contain spaces and parentheses, so fields are counted from the
// last ')'.
func parseStat(data []byte) (procStat, error) {
	s := string(data)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return procStat{}, errors.New("malformed /proc stat: no command name")
	}
	// Fields after the name, numbered from 3 as in proc(5): state(3) ppid(4)
	// ... utime(14) stime(15) ... rss(24).
	fields := strings.Fields(s[closing+1:])
	const first = 3
	if len(fields) < 24-first+1 {
		return procStat{}, fmt.Errorf("malformed /proc stat: %d fields", len(fields))
	}
	field := func(n int) (int64, error) { return strconv.ParseInt(fields[n-first], 10, 64) }
	ppid, err := field(4)
	if err != nil {
		return procStat{}, fmt.Errorf("malformed /proc stat ppid: %w", err)
	}
	utime, err := field(14)
	if err != nil {
		return procStat{}, fmt.Errorf("malformed /proc stat utime: %w", err)
	}
	stime, err := field(15)
	if err != nil {
		return procStat{}, fmt.Errorf("malformed /proc stat stime: %w", err)
	}
	rss, err := field(24)
	if err != nil {
		return procStat{}, fmt.Errorf("malformed /proc stat rss: %w", err)
	}
	return procStat{
		comm:       s[open+1 : closing],
		ppid:       int(ppid),
		cpuSeconds: float64(utime+stime) / clockTicks,
		rssPages:   rss,
	}, nil
}

// ProcessSample is one child process at one moment.
type ProcessSample struct {
	CPUSeconds float64 `json:"cpuSeconds"`
	RSSBytes   int64   `json:"rssBytes"`
	// PeakRSSBytes is the kernel's high-water mark of the resident set
	// (VmHWM) since the process started.
	PeakRSSBytes int64 `json:"peakRssBytes"`
}

// sampleProcesses reads CPU time and memory of each child. A child that is
// gone is left out.
func sampleProcesses(children []childProcess) map[string]ProcessSample {
	out := make(map[string]ProcessSample, len(children))
	page := int64(os.Getpagesize())
	for _, c := range children {
		data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(c.pid), "stat"))
		if err != nil {
			continue
		}
		s, err := parseStat(data)
		if err != nil {
			continue
		}
		out[c.name] = ProcessSample{CPUSeconds: s.cpuSeconds, RSSBytes: s.rssPages * page, PeakRSSBytes: peakRSS(c.pid)}
	}
	return out
}

// peakRSS reads VmHWM from /proc/<pid>/status; 0 when unreadable.
func peakRSS(pid int) int64 {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			fields := strings.Fields(rest)
			if len(fields) > 0 {
				kb, err := strconv.ParseInt(fields[0], 10, 64)
				if err == nil {
					return kb * 1024
				}
			}
		}
	}
	return 0
}

// cpuDelta is the CPU seconds each process used between two samples.
func cpuDelta(before, after map[string]ProcessSample) map[string]float64 {
	out := make(map[string]float64, len(after))
	for name, a := range after {
		out[name] = a.CPUSeconds - before[name].CPUSeconds
	}
	return out
}
