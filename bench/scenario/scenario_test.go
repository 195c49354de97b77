package scenario

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/sdk/rules"
)

const minimal = `{"name":"t","duration":"10s","arrival":{"unit":"rps","base":100},
 "cost":{"cpu":{"dist":"constant","mean":"1ms"}},"client":{"deadline":"100ms"}}`

func TestDecodeDefaults(t *testing.T) {
	s, err := Decode([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if s.Seed != 1 || s.Client.MaxAttempts != 1 || s.Client.Backoff.D() != 10*time.Millisecond {
		t.Fatalf("defaults not applied: seed %d attempts %d backoff %s", s.Seed, s.Client.MaxAttempts, s.Client.Backoff.D())
	}
	if got := s.ClassShares(); got[1] != 1 {
		t.Fatalf("default class mix = %v, want all core", got)
	}
}

func TestDecodeRejects(t *testing.T) {
	tests := []struct {
		name, json, field string
	}{
		{"unknown field", `{"name":"t","bogus":1}`, "bogus"},
		{"wrong type", `{"name":5}`, "name"},
		{"trailing", minimal + `{}`, ""},
		{"empty", ``, ""},
		{"bad name", strings.Replace(minimal, `"t"`, `"a b"`, 1), "name"},
		{"no duration", strings.Replace(minimal, `"10s"`, `"0s"`, 1), "duration"},
		{"bad unit", strings.Replace(minimal, `"rps"`, `"qps"`, 1), "arrival.unit"},
		{"bad dist", strings.Replace(minimal, `"constant"`, `"poisson"`, 1), "cost.cpu.dist"},
		{"negative rate", strings.Replace(minimal, `"base":100`, `"base":-1`, 1), "arrival.base"},
		{"segment outside run", strings.Replace(minimal, `"base":100}`, `"base":1,"segments":[{"from":"5s","to":"11s","shape":"constant","rate":2}]}`, 1), "arrival.segments[0]"},
		{"bad shape", strings.Replace(minimal, `"base":100}`, `"base":1,"segments":[{"from":"1s","to":"2s","shape":"square","rate":2}]}`, 1), "arrival.segments[0].shape"},
		{"sine without period", strings.Replace(minimal, `"base":100}`, `"base":1,"segments":[{"from":"1s","to":"2s","shape":"sine","rate":2}]}`, 1), "arrival.segments[0].period"},
		{"classes sum", strings.Replace(minimal, `"client"`, `"classes":{"core":0.5,"batch":0.2},"client"`, 1), "classes"},
		{"unknown class", strings.Replace(minimal, `"client"`, `"classes":{"gold":1},"client"`, 1), "classes.gold"},
		{"latency event without wait", strings.Replace(minimal, `"client"`, `"events":[{"kind":"downstream_latency","from":"1s","to":"2s","factor":2}],"client"`, 1), "events[0].kind"},
		{"event factor", strings.Replace(minimal, `"client"`, `"events":[{"kind":"capacity","from":"1s","to":"2s","factor":0}],"client"`, 1), "events[0].factor"},
		{"pause too long", strings.Replace(minimal, `"client"`, `"pauses":{"every":"10ms","length":"20ms"},"client"`, 1), "pauses.length"},
		{"attempts", strings.Replace(minimal, `"deadline":"100ms"`, `"deadline":"100ms","max_attempts":11`, 1), "client.max_attempts"},
		{"no deadline", strings.Replace(minimal, `"100ms"`, `"0s"`, 1), "client.deadline"},
		{"zipf", strings.Replace(minimal, `"client"`, `"users":{"count":10,"s":0.5},"client"`, 1), "users.s"},
		// Its parameters come from the mean's logarithm: a zero mean sampled NaN.
		{"lognormal without a mean", strings.Replace(minimal, `}},"client"`, `},"wait":{"dist":"lognormal","mean":"0s","stddev":"1ms"}},"client"`, 1), "cost.wait.mean"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.json))
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("not a *ValidationError: %v", err)
			}
			for _, fe := range ve.Errors {
				if fe.Field == tt.field {
					return
				}
			}
			t.Fatalf("no error for field %q: %v", tt.field, err)
		})
	}
}

func TestShippedScenariosDecode(t *testing.T) {
	files, err := filepath.Glob("../scenarios/*.json")
	if err != nil || len(files) < 9 {
		t.Fatalf("want at least 9 shipped scenarios, got %d (%v)", len(files), err)
	}
	for _, f := range files {
		s, err := Load(f)
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.TrimSuffix(filepath.Base(f), ".json"); s.Name != want {
			t.Errorf("%s: name %q, want the file name %q", f, s.Name, want)
		}
	}
}

func TestRateAt(t *testing.T) {
	s, err := Load("../scenarios/ramp-3x.json")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		at   time.Duration
		want float64
	}{
		{0, 50}, {10 * time.Second, 175}, {20 * time.Second, 300}, {29 * time.Second, 300},
	}
	for _, tt := range tests {
		if got := s.RateAt(tt.at, 100); got < tt.want-1e-9 || got > tt.want+1e-9 {
			t.Errorf("RateAt(%s) = %v, want %v", tt.at, got, tt.want)
		}
	}
	if got := s.MaxRate(100); got != 300 {
		t.Errorf("MaxRate = %v, want 300", got)
	}
	if got := s.LastDisturbanceEnd(); got != 20*time.Second {
		t.Errorf("LastDisturbanceEnd = %s, want 20s", got)
	}
}

func TestFactorsAndIdealCapacity(t *testing.T) {
	s, err := Load("../scenarios/latency-step.json")
	if err != nil {
		t.Fatal(err)
	}
	if f := s.LatencyFactorAt(10 * time.Second); f != 40 {
		t.Fatalf("latency factor in the step = %v, want 40", f)
	}
	if f := s.LatencyFactorAt(40 * time.Second); f != 1 {
		t.Fatalf("latency factor after the step = %v, want 1", f)
	}
	// 32 connections / 1.2 s = 26.7 calls per second.
	if c := s.IdealCapacity(10*time.Second, 500); c < 26 || c > 27 {
		t.Fatalf("ideal capacity in the step = %v, want ~26.7", c)
	}
	if c := s.IdealCapacity(0, 500); c != 500 {
		t.Fatalf("ideal capacity before the step = %v, want 500 (CPU-bound)", c)
	}
	if got := s.LastDisturbanceEnd(); got != 35*time.Second {
		t.Fatalf("LastDisturbanceEnd = %s, want 35s", got)
	}
	h, _ := Load("../scenarios/capacity-halved.json")
	if got := h.LastDisturbanceEnd(); got != 10*time.Second {
		t.Fatalf("capacity-halved LastDisturbanceEnd = %s, want 10s (permanent change)", got)
	}
}

func TestSourceIsDeterministic(t *testing.T) {
	s, _ := Load("../scenarios/spike-5.7x.json")
	a := NewSource(s, 7).Arrivals(200)
	b := NewSource(s, 7).Arrivals(200)
	if len(a) != len(b) || len(a) == 0 {
		t.Fatalf("arrival counts differ: %d vs %d", len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("arrival %d differs", i)
		}
	}
	// Expected: 0.8*200*15 s + 5.7*200*10 s = 2400 + 11400 = 13800.
	if n := len(a); n < 13000 || n > 14600 {
		t.Fatalf("got %d arrivals, want ~13800", n)
	}
	src := NewSource(s, 1)
	var counts [4]int
	for range 10000 {
		counts[src.Class()]++
	}
	if counts[0] < 800 || counts[0] > 1200 || counts[3] < 2700 || counts[3] > 3300 {
		t.Fatalf("class mix off: %v", counts)
	}
	for range 100 {
		if u := src.User(); u < 1 || u > 10000 {
			t.Fatalf("user %d out of range", u)
		}
	}
}

func TestSampleMeans(t *testing.T) {
	tests := []Dist{
		{Dist: DistConstant, Mean: ms(4)},
		{Dist: DistUniform, Mean: ms(4), Spread: ms(2)},
		{Dist: DistExponential, Mean: ms(4)},
		{Dist: DistLognormal, Mean: ms(4), Stddev: ms(1)},
	}
	s, _ := Decode([]byte(minimal))
	for _, d := range tests {
		rng := NewSource(s, 3).Rand()
		var sum time.Duration
		const n = 20000
		for range n {
			sum += d.Sample(rng)
		}
		if mean := sum / n; mean < 3800*time.Microsecond || mean > 4200*time.Microsecond {
			t.Errorf("%s: mean %s, want ~4ms", d.Dist, mean)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "nope.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("got %v, want ErrNotExist", err)
	}
}

func ms(n int) rules.Duration { return rules.Duration(time.Duration(n) * time.Millisecond) }

// A rate_end or amplitude left on a segment of another shape is ignored by
// RateAt, so it must not inflate MaxRate: thinning draws MaxRate x duration
// candidates, and a stray "rate_end": 1e12 on a constant segment made
// Arrivals run for hours.
func TestMaxRateIgnoresFieldsOfOtherShapes(t *testing.T) {
	in := strings.Replace(minimal, `"base":100}`, `"base":1,"segments":[
		{"from":"1s","to":"2s","shape":"constant","rate":5,"rate_end":1e12,"amplitude":1e12},
		{"from":"2s","to":"3s","shape":"ramp","rate":2,"rate_end":7,"amplitude":1e12},
		{"from":"3s","to":"4s","shape":"sine","rate":3,"rate_end":1e12,"amplitude":1,"period":"1s"}]}`, 1)
	s, err := Decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.MaxRate(1); got != 7 {
		t.Fatalf("MaxRate = %v, want 7 (the ramp's end)", got)
	}
	if n := len(NewSource(s, 0).Arrivals(1)); n > 100 {
		t.Fatalf("%d arrivals in 10 s at rates of at most 7/s", n)
	}
}
