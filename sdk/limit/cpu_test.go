package limit

import (
	"errors"
	"testing"
	"testing/fstest"
	"time"

	"governor.dev/governor/sdk/clock"
)

func TestCPUSamplerSources(t *testing.T) {
	tests := []struct {
		name       string
		files      fstest.MapFS
		next       map[string]string // the usage file after 1 s
		wantSource string
		wantCPUs   float64 // 0: the machine's
		wantUtil   float64
	}{
		{
			name: "cgroup v2 with a quota of 2 CPUs",
			files: fstest.MapFS{
				"proc/self/cgroup":                     {Data: []byte("0::/kubepods/pod1\n")},
				"sys/fs/cgroup/kubepods/pod1/cpu.stat": {Data: []byte("usage_usec 1000000\nuser_usec 800000\n")},
				"sys/fs/cgroup/kubepods/pod1/cpu.max":  {Data: []byte("200000 100000\n")},
			},
			next:       map[string]string{"sys/fs/cgroup/kubepods/pod1/cpu.stat": "usage_usec 2500000\n"},
			wantSource: CPUSourceCgroupV2, wantCPUs: 2, wantUtil: 0.75,
		},
		{
			name: "cgroup v2 at the namespace root",
			files: fstest.MapFS{
				"proc/self/cgroup":       {Data: []byte("0::/\n")},
				"sys/fs/cgroup/cpu.stat": {Data: []byte("usage_usec 0\n")},
				"sys/fs/cgroup/cpu.max":  {Data: []byte("100000 100000\n")},
			},
			next:       map[string]string{"sys/fs/cgroup/cpu.stat": "usage_usec 500000\n"},
			wantSource: CPUSourceCgroupV2, wantCPUs: 1, wantUtil: 0.5,
		},
		{
			name: "cgroup v1 cpuacct with a quota of 1 CPU",
			files: fstest.MapFS{
				"proc/self/cgroup":                        {Data: []byte("2:cpu,cpuacct:/\n0::/\n")},
				"sys/fs/cgroup/cpuacct/cpuacct.usage":     {Data: []byte("1000000000\n")},
				"sys/fs/cgroup/cpuacct/cpu.cfs_quota_us":  {Data: []byte("100000\n")},
				"sys/fs/cgroup/cpuacct/cpu.cfs_period_us": {Data: []byte("100000\n")},
			},
			next:       map[string]string{"sys/fs/cgroup/cpuacct/cpuacct.usage": "1900000000\n"},
			wantSource: CPUSourceCgroupV1, wantCPUs: 1, wantUtil: 0.9,
		},
		{
			name:       "proc/stat outside a cgroup",
			files:      fstest.MapFS{"proc/stat": {Data: []byte("cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 1 2 3 4\n")}},
			next:       map[string]string{"proc/stat": "cpu  400 0 200 1200 0 0 0 0 0 0\n"},
			wantSource: CPUSourceProcStat, wantUtil: 0.5, // busy +400 of total +800
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(time.Time{})
			s, err := NewCPUSampler(tt.files, clk)
			if err != nil {
				t.Fatalf("NewCPUSampler: %v", err)
			}
			if s.Source() != tt.wantSource {
				t.Fatalf("Source() = %q, want %q", s.Source(), tt.wantSource)
			}
			if tt.wantCPUs != 0 && s.CPUs() != tt.wantCPUs {
				t.Fatalf("CPUs() = %v, want %v", s.CPUs(), tt.wantCPUs)
			}
			for name, data := range tt.next {
				tt.files[name] = &fstest.MapFile{Data: []byte(data)}
			}
			clk.Advance(time.Second)
			u, err := s.Utilization()
			if err != nil {
				t.Fatalf("Utilization: %v", err)
			}
			if diff := u - tt.wantUtil; diff > 1e-9 || diff < -1e-9 {
				t.Fatalf("Utilization() = %v, want %v", u, tt.wantUtil)
			}
			// No time and no usage passed: 0, not a division by zero.
			if u, err := s.Utilization(); err != nil || u != 0 {
				t.Fatalf("second Utilization() = %v, %v; want 0, nil", u, err)
			}
		})
	}
}

func TestCPUSamplerErrors(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	if _, err := NewCPUSampler(fstest.MapFS{}, clk); !errors.Is(err, ErrCPU) {
		t.Fatalf("empty fs: err = %v, want ErrCPU", err)
	}
	if _, err := NewCPUSampler(nil, clk); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("nil fs: err = %v, want ErrInvalidOption", err)
	}
	fsys := fstest.MapFS{"proc/stat": {Data: []byte("intr 1 2 3\n")}}
	if _, err := NewCPUSampler(fsys, clk); !errors.Is(err, ErrCPU) {
		t.Fatalf("bad proc/stat: err = %v, want ErrCPU", err)
	}
	fsys = fstest.MapFS{"sys/fs/cgroup/cpu.stat": {Data: []byte("usage_usec 10\n")}}
	s, err := NewCPUSampler(fsys, clk)
	if err != nil {
		t.Fatal(err)
	}
	fsys["sys/fs/cgroup/cpu.stat"] = &fstest.MapFile{Data: []byte("usage_usec lots\n")}
	clk.Advance(time.Second)
	if _, err := s.Utilization(); !errors.Is(err, ErrCPU) {
		t.Fatalf("bad cpu.stat: err = %v, want ErrCPU", err)
	}
}

func TestParseCPUFiles(t *testing.T) {
	tests := []struct {
		name string
		run  func() error
		ok   bool
	}{
		{"cpu.stat ok", func() error { _, err := parseCPUStat([]byte("usage_usec 12\n")); return err }, true},
		{"cpu.stat missing", func() error { _, err := parseCPUStat([]byte("user_usec 12\n")); return err }, false},
		{"cpu.stat negative", func() error { _, err := parseCPUStat([]byte("usage_usec -1\n")); return err }, false},
		{"cpu.max unlimited", func() error { _, _, ok, err := parseCPUMax([]byte("max 100000")); return okErr(!ok, err) }, true},
		{"cpu.max quota", func() error {
			q, p, ok, err := parseCPUMax([]byte("50000 100000"))
			return okErr(ok && q/p == 0.5, err)
		}, true},
		{"cpu.max zero period", func() error { _, _, _, err := parseCPUMax([]byte("max 0")); return err }, false},
		{"cpu.max one field", func() error { _, _, _, err := parseCPUMax([]byte("max")); return err }, false},
		{"proc/stat short", func() error { _, _, err := parseProcStat([]byte("cpu 1 2")); return err }, false},
		{"proc/stat overflow", func() error {
			_, _, err := parseProcStat([]byte("cpu 18446744073709551615 1 0 0"))
			return err
		}, false},
		{"proc/stat ok", func() error {
			b, tot, err := parseProcStat([]byte("cpu 1 2 3 4 5 6 7 8 9 10"))
			return okErr(b == 27 && tot == 36, err)
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run()
			if (err == nil) != tt.ok {
				t.Fatalf("err = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrCPU) {
				t.Fatalf("err %v does not wrap ErrCPU", err)
			}
		})
	}
}

func okErr(ok bool, err error) error {
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("limit: cpu usage: wrong value")
	}
	return nil
}

func TestParseProcCgroup(t *testing.T) {
	v2, v1 := parseProcCgroup([]byte("12:cpu,cpuacct:/docker/abc\n0::/system.slice/x.service\n3:memory:/m\nbogus\n1:cpuacct:/../etc\n"))
	if v2 != "system.slice/x.service" || v1 != "docker/abc" {
		t.Fatalf("parseProcCgroup = %q, %q", v2, v1)
	}
}

func FuzzParseCPUFiles(f *testing.F) {
	for _, s := range []string{
		"usage_usec 1000\nuser_usec 5\n", "max 100000", "200000 100000", "cpu  1 2 3 4 5 6 7 8 0 0\n",
		"0::/a/b\n2:cpu,cpuacct:/c\n", "", "cpu", "usage_usec", "cpu 18446744073709551615 1",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if n, err := parseCPUStat(b); err == nil && n < 0 {
			t.Fatalf("parseCPUStat returned a negative counter %d", n)
		} else if err != nil && !errors.Is(err, ErrCPU) {
			t.Fatalf("parseCPUStat error %v does not wrap ErrCPU", err)
		}
		if q, p, ok, err := parseCPUMax(b); err == nil && (p <= 0 || (ok && q <= 0)) {
			t.Fatalf("parseCPUMax returned quota %v period %v", q, p)
		}
		if busy, total, err := parseProcStat(b); err == nil && busy > total {
			t.Fatalf("parseProcStat: busy %d > total %d", busy, total)
		}
		v2, v1 := parseProcCgroup(b)
		for _, p := range []string{v2, v1} {
			if len(p) > 0 && (p[0] == '/' || containsDotDot(p)) {
				t.Fatalf("parseProcCgroup returned an unsafe path %q", p)
			}
		}
	})
}

func containsDotDot(p string) bool {
	for i := 0; i+1 < len(p); i++ {
		if p[i] == '.' && p[i+1] == '.' {
			return true
		}
	}
	return false
}

// scripted returns utilizations in order, then repeats the last.
type scripted struct {
	vals []float64
	err  error
	i    int
}

func (s *scripted) Utilization() (float64, error) {
	if s.err != nil {
		return 0, s.err
	}
	v := s.vals[min(s.i, len(s.vals)-1)]
	s.i++
	return v, nil
}

func TestCPUSignal(t *testing.T) {
	tests := []struct {
		name string
		vals []float64
		want []bool
	}{
		{"idle stays off", []float64{0.1, 0.2, 0.1}, []bool{false, false, false}},
		{"sustained load engages", []float64{0.5, 0.95, 0.95, 0.95, 0.95}, []bool{false, false, false, false, true}},
		{"a single spike does not engage", []float64{0.5, 1, 0.5, 0.5}, []bool{false, false, false, false}},
		// Jitter between 0.72 and 0.88 around the threshold: the average stays
		// between release and engage, so once on it stays on.
		{"jitter around the threshold does not flap", []float64{0.9, 0.72, 0.88, 0.72, 0.88, 0.72, 0.88, 0.72},
			[]bool{true, true, true, true, true, true, true, true}},
		{"release needs a real drop", []float64{0.9, 0.75, 0.75, 0.3, 0.3}, []bool{true, true, true, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(time.Time{})
			s, err := NewCPUSignal(&scripted{vals: tt.vals}, clk, CPUSignalOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range tt.want {
				if got := s.Overloaded(); got != want {
					t.Fatalf("sample %d (%v, ema %.3f): Overloaded() = %v, want %v", i, tt.vals[i], s.Utilization(), got, want)
				}
				clk.Advance(250 * time.Millisecond)
			}
		})
	}
}

func TestCPUSignalSamplesAtMostEvery(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	src := &scripted{vals: []float64{0.9, 0.1, 0.1}}
	s, err := NewCPUSignal(src, clk, CPUSignalOptions{Every: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if !s.Overloaded() {
			t.Fatal("signal changed within Every")
		}
		clk.Advance(50 * time.Millisecond)
	}
	if src.i != 1 {
		t.Fatalf("source sampled %d times within Every, want 1", src.i)
	}
	src.err = ErrCPU
	clk.Advance(time.Second)
	if !s.Overloaded() || !errors.Is(s.Err(), ErrCPU) {
		t.Fatalf("a failing source must keep the last decision and report its error, got err %v", s.Err())
	}
}

func TestCPUSignalRefusesBadOptions(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	for _, o := range []CPUSignalOptions{
		{Engage: 1.5}, {Engage: 0.5, Release: 0.6}, {Alpha: 2}, {Every: -time.Second}, {Release: -1},
	} {
		if _, err := NewCPUSignal(&scripted{vals: []float64{0}}, clk, o); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("NewCPUSignal(%+v): err = %v, want ErrInvalidOption", o, err)
		}
	}
	if _, err := NewCPUSignal(nil, clk, CPUSignalOptions{}); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("nil source: err = %v", err)
	}
}
