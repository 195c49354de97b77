package thresholds

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

func every5m(i int) time.Time { return t0.Add(time.Duration(i) * 5 * time.Minute) }

func mustDetector(t testing.TB) *Detector {
	t.Helper()
	d, err := New(DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestInconclusiveDuringWarmup(t *testing.T) {
	d := mustDetector(t)
	rng := rand.New(rand.NewPCG(1, 1))
	w := DefaultOptions().Warmup
	for i := range w + 10 {
		res := d.Observe(every5m(i), 10+rng.NormFloat64())
		if i < w && (!res.Inconclusive || res.Score != 0) {
			t.Fatalf("sample %d of warm-up %d: %+v, want inconclusive with score 0", i, w, res)
		}
		if i >= w && res.Inconclusive {
			t.Fatalf("sample %d after warm-up still inconclusive", i)
		}
	}
	// Even a huge outlier during warm-up gives no confident answer.
	d = mustDetector(t)
	for i := range 20 {
		d.Observe(every5m(i), 1)
	}
	if res := d.Observe(every5m(20), 1e9); !res.Inconclusive || res.Score != 0 {
		t.Fatalf("outlier during warm-up: %+v, want inconclusive", res)
	}
}

// TestScoresInRange feeds awkward series; every score stays in [0, 1].
func TestScoresInRange(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	series := map[string]func(i int) float64{
		"constant":    func(int) float64 { return 5 },
		"zeros":       func(int) float64 { return 0 },
		"huge":        func(i int) float64 { return MaxValue * float64(i%3-1) },
		"tiny":        func(i int) float64 { return 1e-300 * rng.Float64() },
		"negative":    func(int) float64 { return -1e6 + rng.NormFloat64() },
		"heavy tails": func(int) float64 { return math.Tan(math.Pi * (rng.Float64() - 0.5)) },
		"sparse":      func(i int) float64 { return float64(i%97/96) * 1e4 },
	}
	for name, gen := range series {
		t.Run(name, func(t *testing.T) {
			d := mustDetector(t)
			for i := range 3000 {
				res := d.Observe(every5m(i), gen(i))
				if !(res.Score >= 0 && res.Score <= 1) {
					t.Fatalf("sample %d: score %v outside [0, 1]", i, res.Score)
				}
			}
		})
	}
}

func TestNaNAndInfRefused(t *testing.T) {
	a, b := mustDetector(t), mustDetector(t)
	rng := rand.New(rand.NewPCG(3, 3))
	for i := range 1000 {
		v := 3 + rng.NormFloat64()
		if i%50 == 0 {
			for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 2 * MaxValue, -2 * MaxValue} {
				if res := a.Observe(every5m(i), bad); !res.Inconclusive || res.Score != 0 {
					t.Fatalf("bad value %v: %+v, want inconclusive", bad, res)
				}
			}
		}
		ra, rb := a.Observe(every5m(i), v), b.Observe(every5m(i), v)
		if ra != rb {
			t.Fatalf("sample %d: refused values changed the state: %+v vs %+v", i, ra, rb)
		}
	}
}

// maxScore returns the largest score over samples [from, to).
func run(d *Detector, n int, gen func(i int) float64) []Result {
	out := make([]Result, n)
	for i := range n {
		out[i] = d.Observe(every5m(i), gen(i))
	}
	return out
}

func maxScore(rs []Result, from, to int) float64 {
	m := 0.0
	for _, r := range rs[from:to] {
		m = math.Max(m, r.Score)
	}
	return m
}

func TestDetectsAnomalies(t *testing.T) {
	tests := []struct {
		name string
		from int // compare with normal data from this sample on (0: end of warm-up)
		at   int // first anomalous sample
		gen  func(rng *rand.Rand) func(i int) float64
	}{
		{"spike", 0, 2000, func(rng *rand.Rand) func(int) float64 {
			return func(i int) float64 {
				if i == 2000 {
					return 60
				}
				return 50 + rng.NormFloat64()
			}
		}},
		{"level shift up", 0, 2000, func(rng *rand.Rand) func(int) float64 {
			return func(i int) float64 {
				if i >= 2000 {
					return 55 + rng.NormFloat64()
				}
				return 50 + rng.NormFloat64()
			}
		}},
		{"drop to zero", 0, 2000, func(rng *rand.Rand) func(int) float64 {
			return func(i int) float64 {
				if i >= 2000 {
					return 0
				}
				return 50 + rng.NormFloat64()
			}
		}},
		{"missing daily peak", 288 * 5, 288 * 8, func(rng *rand.Rand) func(int) float64 {
			// A daily cycle (5-minute samples) that stays flat on day 8.
			return func(i int) float64 {
				day := math.Sin(2 * math.Pi * float64(i%288) / 288)
				if i/288 == 8 {
					day = 0
				}
				return 100 + 40*day + rng.NormFloat64()
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gen := tt.gen(rand.New(rand.NewPCG(4, 4)))
			rs := run(mustDetector(t), tt.at+100, gen)
			from := max(tt.from, DefaultOptions().Warmup)
			before := maxScore(rs, from, tt.at)
			after := maxScore(rs, tt.at, tt.at+100)
			t.Logf("max score before %.4f, within 100 samples after %.4f", before, after)
			if !(after > before) {
				t.Errorf("anomaly not ranked above normal data: max %.4f after onset, %.4f before", after, before)
			}
		})
	}
}

// TestCusumFindsSmallShift: a shift of one spread is hard to see sample by
// sample; the CUSUM feature accumulates it.
func TestCusumFindsSmallShift(t *testing.T) {
	opt := DefaultOptions()
	opt.Weights = [NumFeatures]float64{CusumUp: 1, CusumDown: 1}
	d, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(6, 6))
	rs := run(d, 2300, func(i int) float64 {
		if i >= 2000 {
			return 51 + rng.NormFloat64()
		}
		return 50 + rng.NormFloat64()
	})
	before, after := maxScore(rs, opt.Warmup, 2000), maxScore(rs, 2000, 2300)
	t.Logf("max score before %.4f, after %.4f (feature %s)", before, after, rs[2299].Feature)
	if !(after > before) {
		t.Errorf("one-spread shift not found: max %.4f after, %.4f before", after, before)
	}
}

func TestSeasonalProfileUsed(t *testing.T) {
	d := mustDetector(t)
	rng := rand.New(rand.NewPCG(5, 5))
	var last Result
	for i := range 288 * 4 {
		last = d.Observe(every5m(i), 100+40*math.Sin(2*math.Pi*float64(i%288)/288)+rng.NormFloat64())
	}
	if !last.Seasonal {
		t.Fatalf("after 4 days of a clean daily cycle the seasonal profile is not used: %+v", last)
	}
	if math.Abs(last.Expected-(100+40*math.Sin(2*math.Pi*287/288))) > 3 {
		t.Errorf("expected %v, want the daily profile value", last.Expected)
	}
}

// TestWeeklySeason: weekends run at a third of the weekday load; after two
// weeks the weekly profile expects it, and a weekday-level Sunday is flagged.
func TestWeeklySeason(t *testing.T) {
	d := mustDetector(t)
	rng := rand.New(rand.NewPCG(7, 7))
	level := func(ts time.Time) float64 {
		if wd := ts.Weekday(); wd == time.Saturday || wd == time.Sunday {
			return 100
		}
		return 300
	}
	const perWeek = 7 * 288
	var last Result
	var week3 []float64
	for i := range 3 * perWeek {
		ts := every5m(i) // t0 is a Monday
		last = d.Observe(ts, level(ts)+5*rng.NormFloat64())
		if i >= 2*perWeek {
			week3 = append(week3, last.Score)
		}
	}
	if !last.Seasonal || math.Abs(last.Expected-100) > 10 {
		t.Fatalf("end of a weekend after three weeks: %+v, want the weekly profile expecting about 100", last)
	}
	// The fourth week's Saturday runs at weekday load.
	sat := 3*perWeek + 5*288
	for i := 3 * perWeek; i < sat; i++ {
		ts := every5m(i)
		d.Observe(ts, level(ts)+5*rng.NormFloat64())
	}
	res := d.Observe(every5m(sat), 300)
	as := 0
	for _, s := range week3 {
		if s >= res.Score {
			as++
		}
	}
	t.Logf("weekday load on a Saturday: %+v; %d of %d samples of a normal week scored as high", res, as, len(week3))
	if !res.Seasonal || math.Abs(res.Expected-100) > 10 || res.Surprise < 20 {
		t.Errorf("weekday load on a Saturday: %+v, want judged against the weekend level", res)
	}
	if as > len(week3)/200 {
		t.Errorf("%d normal samples scored at least %.4f, want at most 0.5%%", as, res.Score)
	}
}

func TestOptionsValidate(t *testing.T) {
	mod := func(f func(*Options)) Options { o := DefaultOptions(); f(&o); return o }
	tests := []struct {
		name  string
		opt   Options
		field string
	}{
		{"warmup", mod(func(o *Options) { o.Warmup = 1 }), "Warmup"},
		{"baseline", mod(func(o *Options) { o.BaselineHalfLife = math.NaN() }), "BaselineHalfLife"},
		{"clip", mod(func(o *Options) { o.Clip = 0 }), "Clip"},
		{"season", mod(func(o *Options) { o.Seasons = []Season{{Period: -time.Hour, Bins: 10}} }), "Seasons[0].Period"},
		{"season bins", mod(func(o *Options) { o.Seasons = []Season{Daily, {Period: time.Hour, Bins: 1}} }), "Seasons[1].Bins"},
		{"memory", mod(func(o *Options) { o.MemoryHalfLife = 0 }), "MemoryHalfLife"},
		{"weights", mod(func(o *Options) { o.Weights[0] = -1 }), "Weights[point-up]"},
		{"no weights", mod(func(o *Options) { o.Weights = [NumFeatures]float64{} }), "all zero"},
		{"volatility", mod(func(o *Options) { o.VolatilityHalfLife = math.Inf(1) }), "VolatilityHalfLife"},
		{"echo window", mod(func(o *Options) { o.EchoWindow = -1 }), "EchoWindow"},
		{"echo damping", mod(func(o *Options) { o.EchoDamping = 1.5 }), "EchoDamping"},
		{"corroboration level", mod(func(o *Options) { o.CorroborationLevel = math.NaN() }), "CorroborationLevel"},
		{"lone damping", mod(func(o *Options) { o.LoneDamping = -0.1 }), "LoneDamping"},
		{"min value", mod(func(o *Options) { o.MinValue[ShiftUp] = math.Inf(1) }), "MinValue[shift-up]"},
		{"min value negative", mod(func(o *Options) { o.MinValue[EnvelopeUp] = -1 }), "MinValue[envelope-up]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.opt)
			if !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("err %v, want ErrOptions naming %s", err, tt.field)
			}
		})
	}
	if _, err := New(DefaultOptions()); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
}
