package limit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"governor.dev/governor/sdk/clock"
)

// ErrCPU is wrapped by the errors of CPUSampler: no readable CPU accounting,
// or a file that does not parse.
var ErrCPU = errors.New("limit: cpu usage")

// CPU accounting sources, as named by CPUSampler.Source.
const (
	CPUSourceCgroupV2 = "cgroup2"   // <cgroup>/cpu.stat usage_usec, quota from cpu.max
	CPUSourceCgroupV1 = "cgroup1"   // cpuacct.usage, quota from cpu.cfs_quota_us
	CPUSourceProcStat = "proc/stat" // the whole machine
)

// CPUSampler measures the CPU utilization of the process's container
// (cgroup v2 or v1) or, outside one, of the machine (/proc/stat): the share of
// the CPUs available to it (the cgroup quota, else every CPU) used between two
// calls of Utilization. Container-aware accounting is what aegis-style
// limiters get wrong when they read /proc/stat inside a container.
//
// It reads files through an fs.FS rooted at "/" (os.DirFS("/") in
// production, fstest.MapFS in tests) and times samples with an injected
// clock. It is safe for concurrent use.
type CPUSampler struct {
	fsys   fs.FS
	clk    clock.Clock
	source string
	usage  string  // file with the usage counter
	cpus   float64 // CPUs available
	mu     sync.Mutex
	primed bool
	last   cpuReading
}

type cpuReading struct {
	busy, total float64 // cgroups: CPU-ns used and wall ns; proc/stat: busy and total ticks
}

// NewCPUSampler finds the CPU accounting of the current process in fsys
// (rooted at "/"). It prefers cgroup v2, then v1, then /proc/stat.
func NewCPUSampler(fsys fs.FS, clk clock.Clock) (*CPUSampler, error) {
	if fsys == nil || clk == nil {
		return nil, fmt.Errorf("%w: NewCPUSampler needs a file system and a clock", ErrInvalidOption)
	}
	s := &CPUSampler{fsys: fsys, clk: clk, cpus: float64(runtime.NumCPU())}
	v2, v1 := cgroupPaths(fsys)
	for _, dir := range dedupe(path.Join("sys/fs/cgroup", v2), "sys/fs/cgroup") {
		if _, err := fs.Stat(fsys, dir+"/cpu.stat"); err == nil {
			s.source, s.usage = CPUSourceCgroupV2, dir+"/cpu.stat"
			if b, err := fs.ReadFile(fsys, dir+"/cpu.max"); err == nil {
				if q, p, ok, err := parseCPUMax(b); err == nil && ok {
					s.cpus = min(s.cpus, q/p)
				}
			}
			return s, s.prime()
		}
	}
	for _, dir := range dedupe(path.Join("sys/fs/cgroup/cpuacct", v1), "sys/fs/cgroup/cpuacct", "sys/fs/cgroup/cpu,cpuacct") {
		if _, err := fs.Stat(fsys, dir+"/cpuacct.usage"); err == nil {
			s.source, s.usage = CPUSourceCgroupV1, dir+"/cpuacct.usage"
			q, qerr := readInt(fsys, dir+"/cpu.cfs_quota_us")
			p, perr := readInt(fsys, dir+"/cpu.cfs_period_us")
			if qerr == nil && perr == nil && q > 0 && p > 0 {
				s.cpus = min(s.cpus, float64(q)/float64(p))
			}
			return s, s.prime()
		}
	}
	if _, err := fs.Stat(fsys, "proc/stat"); err == nil {
		s.source, s.usage = CPUSourceProcStat, "proc/stat"
		return s, s.prime()
	}
	return nil, fmt.Errorf("%w: no cgroup cpu.stat, cpuacct.usage or /proc/stat found", ErrCPU)
}

func dedupe(paths ...string) []string {
	var out []string
	for _, p := range paths {
		if p != "" && (len(out) == 0 || out[len(out)-1] != p) {
			out = append(out, p)
		}
	}
	return out
}

// cgroupPaths returns the process's cgroup v2 path and v1 cpuacct path from
// /proc/self/cgroup ("" when unknown).
func cgroupPaths(fsys fs.FS) (v2, v1 string) {
	b, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if err != nil {
		return "", ""
	}
	return parseProcCgroup(b)
}

func parseProcCgroup(b []byte) (v2, v1 string) {
	for line := range strings.SplitSeq(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[2], "/") || strings.Contains(parts[2], "..") {
			continue
		}
		p := strings.TrimLeft(parts[2], "/")
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2 = p
		case strings.Contains(","+parts[1]+",", ",cpuacct,"):
			v1 = p
		}
	}
	return v2, v1
}

// Source names the accounting in use: CPUSourceCgroupV2, CPUSourceCgroupV1
// or CPUSourceProcStat.
func (s *CPUSampler) Source() string { return s.source }

// CPUs returns the number of CPUs available (the cgroup quota if lower than
// the machine's).
func (s *CPUSampler) CPUs() float64 { return s.cpus }

func (s *CPUSampler) prime() error {
	r, err := s.read()
	if err != nil {
		return err
	}
	s.last, s.primed = r, true
	return nil
}

func (s *CPUSampler) read() (cpuReading, error) {
	b, err := fs.ReadFile(s.fsys, s.usage)
	if err != nil {
		return cpuReading{}, fmt.Errorf("%w: %w", ErrCPU, err)
	}
	now := float64(s.clk.Nanotime())
	switch s.source {
	case CPUSourceCgroupV2:
		us, err := parseCPUStat(b)
		return cpuReading{busy: float64(us) * 1e3, total: now}, err
	case CPUSourceCgroupV1:
		ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || ns < 0 {
			return cpuReading{}, fmt.Errorf("%w: %s: not a counter", ErrCPU, s.usage)
		}
		return cpuReading{busy: float64(ns), total: now}, nil
	default:
		busy, total, err := parseProcStat(b)
		return cpuReading{busy: float64(busy), total: float64(total)}, err
	}
}

// Utilization returns the share of the available CPU used since the previous
// call (or since NewCPUSampler), between 0 and 1; 0 when no time has passed
// or a counter went backwards.
func (s *CPUSampler) Utilization() (float64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.read()
	if err != nil {
		return 0, err
	}
	prev := s.last
	s.last = r
	dBusy, dTotal := r.busy-prev.busy, r.total-prev.total
	if !s.primed || dTotal <= 0 || dBusy < 0 {
		s.primed = true
		return 0, nil
	}
	if s.source != CPUSourceProcStat {
		dTotal *= s.cpus
	}
	return min(max(dBusy/dTotal, 0), 1), nil
}

// parseCPUStat returns usage_usec from a cgroup v2 cpu.stat file.
func parseCPUStat(b []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == "usage_usec" {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil || n < 0 {
				return 0, fmt.Errorf("%w: cpu.stat: usage_usec %q is not a counter", ErrCPU, v)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("%w: cpu.stat: no usage_usec line", ErrCPU)
}

// parseCPUMax parses a cgroup v2 cpu.max file ("max 100000" or
// "200000 100000"): the quota and period in µs, ok false when unlimited.
func parseCPUMax(b []byte) (quota, period float64, ok bool, err error) {
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0, false, fmt.Errorf("%w: cpu.max: want \"<quota|max> <period>\", got %q", ErrCPU, b)
	}
	p, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || p <= 0 {
		return 0, 0, false, fmt.Errorf("%w: cpu.max: bad period %q", ErrCPU, f[1])
	}
	if f[0] == "max" {
		return 0, float64(p), false, nil
	}
	q, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || q <= 0 {
		return 0, 0, false, fmt.Errorf("%w: cpu.max: bad quota %q", ErrCPU, f[0])
	}
	return float64(q), float64(p), true, nil
}

// parseProcStat returns the busy and total ticks of the aggregate "cpu" line
// of /proc/stat. Idle and iowait are idle; guest time is already in user.
func parseProcStat(b []byte) (busy, total uint64, err error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("%w: proc/stat: no aggregate cpu line", ErrCPU)
	}
	var idle uint64
	for i, s := range f[1:min(len(f), 9)] { // user nice system idle iowait irq softirq steal
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%w: proc/stat: field %d %q is not a counter", ErrCPU, i+1, s)
		}
		if total+v < total {
			return 0, 0, fmt.Errorf("%w: proc/stat: counters overflow", ErrCPU)
		}
		total += v
		if i == 3 || i == 4 {
			idle += v
		}
	}
	return total - idle, total, nil
}

func readInt(fsys fs.FS, name string) (int64, error) {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}
