package thresholds

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRecommender(t *testing.T) {
	opt := DefaultRecommenderOptions()
	opt.MinSamples = 500
	r, err := NewRecommender(opt)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 30 * time.Second) }
	healthy := func(i int) Interval {
		return Interval{
			Time:       at(i),
			Throughput: 800 + 200*rng.Float64(), // healthy peak near 1000 rps
			ErrorRatio: 0.001,
			LatencyP50: 0.020 * (1 + 0.05*rng.NormFloat64()),
			LatencyP99: 0.100 * (1 + 0.05*rng.NormFloat64()),
		}
	}
	for i := range 499 {
		r.Observe(healthy(i))
	}
	rec := r.Recommend()
	if !rec.Inconclusive || !strings.Contains(rec.Reason, "healthy intervals of 500") || rec.RateCeiling != 0 {
		t.Fatalf("with 499 samples: %+v, want inconclusive with zero thresholds", rec)
	}
	// An incident: errors and a throughput burst must not shape the baselines.
	for i := 499; i < 560; i++ {
		iv := healthy(i)
		iv.ErrorRatio, iv.Throughput, iv.LatencyP99 = 0.2, 5000, 2
		if r.Observe(iv) {
			t.Fatalf("interval %d with 20%% errors counted as healthy", i)
		}
	}
	if r.Observe(Interval{Time: at(561), Throughput: math.NaN()}) {
		t.Fatal("NaN interval counted")
	}
	for i := 562; i < 1200; i++ {
		r.Observe(healthy(i))
	}
	rec = r.Recommend()
	if rec.Inconclusive {
		t.Fatalf("still inconclusive: %s", rec.Reason)
	}
	t.Logf("%+v", rec)
	checks := []struct {
		name      string
		got, want float64
		tol       float64
	}{
		{"BaselineP50", rec.BaselineP50, 0.020, 0.02},
		{"BaselineP99", rec.BaselineP99, 0.100, 0.02},
		{"SlowCallThreshold", rec.SlowCallThreshold, 0.200, 0.02},
		{"PeakThroughput", rec.PeakThroughput, 998, 0.02},
		{"RateCeiling", rec.RateCeiling, 1.2 * 998, 0.02},
	}
	for _, c := range checks {
		if math.Abs(c.got-c.want)/c.want > c.tol {
			t.Errorf("%s %v, want %v within %.0f%%", c.name, c.got, c.want, 100*c.tol)
		}
	}
	if !(rec.LatencyWarn > rec.BaselineP99 && rec.LatencyCritical > rec.LatencyWarn && rec.LatencyCritical < 0.3) {
		t.Errorf("alert levels warn %v critical %v, want baseline < warn < critical < 0.3", rec.LatencyWarn, rec.LatencyCritical)
	}
	// The detector may flag a few noise intervals as unusual; the incident
	// intervals (61) must all be excluded.
	if rec.Intervals != 1198 || rec.HealthyIntervals > 1198-61 || rec.HealthyIntervals < 1198-61-10 {
		t.Errorf("intervals %d healthy %d, want 1198 and %d (minus at most 10)", rec.Intervals, rec.HealthyIntervals, 1198-61)
	}
}

func TestRecommenderOptionsValidate(t *testing.T) {
	mod := func(f func(*RecommenderOptions)) RecommenderOptions {
		o := DefaultRecommenderOptions()
		f(&o)
		return o
	}
	tests := []struct {
		name  string
		opt   RecommenderOptions
		field string
	}{
		{"min samples", mod(func(o *RecommenderOptions) { o.MinSamples = 0 }), "MinSamples"},
		{"error ratio", mod(func(o *RecommenderOptions) { o.HealthyErrorRatio = 2 }), "HealthyErrorRatio"},
		{"slow factor", mod(func(o *RecommenderOptions) { o.SlowCallFactor = 0.5 }), "SlowCallFactor"},
		{"headroom", mod(func(o *RecommenderOptions) { o.Headroom = math.NaN() }), "Headroom"},
		{"peak", mod(func(o *RecommenderOptions) { o.PeakQuantile = 0 }), "PeakQuantile"},
		{"alerts", mod(func(o *RecommenderOptions) { o.CriticalSpreads = 1 }), "CriticalSpreads"},
		{"anomaly", mod(func(o *RecommenderOptions) { o.AnomalyScore = 0 }), "AnomalyScore"},
		{"detector", mod(func(o *RecommenderOptions) { o.Detector.Warmup = 0 }), "Warmup"},
		{"sketch", mod(func(o *RecommenderOptions) { o.Sketch.Min = 0 }), "Min"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewRecommender(tt.opt)
			if !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("err %v, want ErrOptions naming %s", err, tt.field)
			}
		})
	}
}

// latencyFeed feeds r intervals of about p99 seconds (10% noise, no
// errors), 30 s apart, and returns how many counted as healthy.
type latencyFeed struct {
	r   *Recommender
	rng *rand.Rand
	i   int
}

func (f *latencyFeed) feed(n int, p99 float64) (healthy int) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for range n {
		f.i++
		v := p99 * (1 + 0.1*f.rng.NormFloat64())
		if f.r.Observe(Interval{Time: t0.Add(time.Duration(f.i) * 30 * time.Second), Throughput: 100, LatencyP50: v / 3, LatencyP99: v}) {
			healthy++
		}
	}
	return healthy
}

func TestLatencyIncidentWithoutErrorsIsNotLearntAsHealthy(t *testing.T) {
	o := DefaultRecommenderOptions()
	o.MinSamples = 500
	r, err := NewRecommender(o)
	require.NoError(t, err)
	f := &latencyFeed{r: r, rng: rand.New(rand.NewPCG(1, 2))}
	require.Equal(t, 3000, f.feed(3000, 0.1))
	before := r.Recommend()
	require.False(t, before.Inconclusive)

	// Two hours at ten times the latency, without errors: the detector
	// adapts within minutes and reports the event once, yet none of it may
	// shape the baselines or the alert levels.
	require.Zero(t, f.feed(240, 1.0), "incident intervals counted as healthy")
	after := r.Recommend()
	require.Equal(t, before.HealthyIntervals, after.HealthyIntervals)
	require.Equal(t, before.BaselineP99, after.BaselineP99)
	require.Equal(t, before.LatencyWarn, after.LatencyWarn)
	require.Equal(t, before.LatencyCritical, after.LatencyCritical)

	// Back to normal: learning resumes at once.
	require.Equal(t, 100, f.feed(100, 0.1))
}

func TestLatencyLevelLastingMinSamplesIsLearntAsTheNewNormal(t *testing.T) {
	o := DefaultRecommenderOptions()
	o.MinSamples = 500
	r, err := NewRecommender(o)
	require.NoError(t, err)
	f := &latencyFeed{r: r, rng: rand.New(rand.NewPCG(3, 4))}
	f.feed(1000, 0.1)
	require.Zero(t, f.feed(o.MinSamples, 0.5), "held out while it may be an incident")
	require.Equal(t, 200, f.feed(200, 0.5), "a level lasting MinSamples intervals is the new normal")

	// The count survives a restart.
	b, err := r.MarshalBinary()
	require.NoError(t, err)
	n, err := RestoreRecommender(o, b)
	require.NoError(t, err)
	require.Equal(t, r.above, n.above)
}

// TestLatencyIncidentAboveTheWarnLevelIsNotLearntAsHealthy: hours at a p99
// above the warn level but below the critical one (60% slower, no errors)
// fire the warn alert; they are held out of the baselines like a critical
// incident, so the warn level does not climb past the incident and silence
// its own alert while the incident lasts.
func TestLatencyIncidentAboveTheWarnLevelIsNotLearntAsHealthy(t *testing.T) {
	o := DefaultRecommenderOptions()
	o.MinSamples = 500
	r, err := NewRecommender(o)
	require.NoError(t, err)
	f := &latencyFeed{r: r, rng: rand.New(rand.NewPCG(1, 2))}
	require.Equal(t, 3000, f.feed(3000, 0.1))
	before := r.Recommend()
	const incident = 0.16
	require.Greater(t, incident, before.LatencyWarn)
	require.Less(t, incident, before.LatencyCritical)
	healthy := f.feed(480, incident) // four hours
	after := r.Recommend()
	// Only the incident's dips below the warn level count (its p99 varies
	// by 10%).
	require.Less(t, healthy, 480/8, "incident intervals counted as healthy")
	require.Less(t, after.LatencyWarn, incident, "the warn level climbed past the incident")
	require.InDelta(t, before.LatencyWarn, after.LatencyWarn, 0.005)
}

// TestHeavyTailedHealthyLatencyKeepsItsLevels: a healthy p99 with a heavy
// tail (log-normal) loses only its rare excursions above the warn level to
// the hold-out, and the levels learnt from it stay put over days.
func TestHeavyTailedHealthyLatencyKeepsItsLevels(t *testing.T) {
	o := DefaultRecommenderOptions()
	o.MinSamples = 500
	r, err := NewRecommender(o)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(5, 6))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	healthy, warn := 0, 0.0
	for i := range 20000 {
		v := 0.1 * math.Exp(0.4*rng.NormFloat64())
		if r.Observe(Interval{Time: t0.Add(time.Duration(i) * 30 * time.Second), Throughput: 100, LatencyP50: v / 3, LatencyP99: v}) {
			healthy++
		}
		if i == 3999 {
			warn = r.Recommend().LatencyWarn
		}
	}
	require.Greater(t, healthy, 20000*98/100)
	require.InEpsilon(t, warn, r.Recommend().LatencyWarn, 0.05)
}

// poisson draws a Poisson count of mean lambda: exactly for small means,
// by the normal approximation for large ones.
func poisson(rng *rand.Rand, lambda float64) float64 {
	if lambda >= 30 {
		return math.Max(0, math.Round(lambda+math.Sqrt(lambda)*rng.NormFloat64()))
	}
	l, k, p := math.Exp(-lambda), 0.0, 1.0
	for {
		p *= rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// errorFeed feeds r intervals 30 s apart with a steady p99 and an error
// ratio drawn by ratio, and returns how many counted as healthy.
type errorFeed struct {
	r   *Recommender
	rng *rand.Rand
	i   int
}

func (f *errorFeed) feed(n int, ratio func(*rand.Rand) float64) (healthy int) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for range n {
		f.i++
		p99 := 0.1 * (1 + 0.05*f.rng.NormFloat64())
		iv := Interval{Time: t0.Add(time.Duration(f.i) * 30 * time.Second), Throughput: 1000, ErrorRatio: ratio(f.rng), LatencyP50: p99 / 3, LatencyP99: p99}
		if f.r.Observe(iv) {
			healthy++
		}
	}
	return healthy
}

// errorsOf returns error ratios of Poisson(share*requests) errors in
// requests requests.
func errorsOf(share, requests float64) func(*rand.Rand) float64 {
	return func(rng *rand.Rand) float64 { return math.Min(1, poisson(rng, share*requests)/requests) }
}

// TestErrorRatioIncidentBelowTheHealthLimitIsNotLearntAsHealthy: eight
// hours at 0.8% errors, above the warn level but under the 1% health
// limit, fire the warn alert; they are held out of the baselines, so the
// error-ratio levels do not climb past the incident (they doubled).
func TestErrorRatioIncidentBelowTheHealthLimitIsNotLearntAsHealthy(t *testing.T) {
	o := DefaultRecommenderOptions() // MinSamples: a day
	r, err := NewRecommender(o)
	require.NoError(t, err)
	f := &errorFeed{r: r, rng: rand.New(rand.NewPCG(7, 8))}
	require.Equal(t, 3000, f.feed(3000, errorsOf(0.001, 30000)))
	before := r.Recommend()
	require.False(t, before.Inconclusive)
	const incident = 0.008
	require.Greater(t, incident, before.ErrorWarn)
	healthy := f.feed(960, errorsOf(incident, 30000)) // eight hours
	after := r.Recommend()
	require.Zero(t, healthy, "incident intervals counted as healthy")
	require.Less(t, after.ErrorWarn, incident, "the warn level climbed past the incident")
	require.InEpsilon(t, before.ErrorWarn, after.ErrorWarn, 0.05)
	require.InEpsilon(t, before.ErrorCritical, after.ErrorCritical, 0.05)

	// Back to normal: learning resumes at once.
	require.Equal(t, 100, f.feed(100, errorsOf(0.001, 30000)))
}

func TestErrorRatioLevelLastingMinSamplesIsLearntAsTheNewNormal(t *testing.T) {
	o := DefaultRecommenderOptions()
	o.MinSamples = 500
	r, err := NewRecommender(o)
	require.NoError(t, err)
	f := &errorFeed{r: r, rng: rand.New(rand.NewPCG(9, 10))}
	f.feed(1000, errorsOf(0.001, 30000))
	require.Zero(t, f.feed(o.MinSamples, errorsOf(0.005, 30000)), "held out while it may be an incident")
	require.Equal(t, 200, f.feed(200, errorsOf(0.005, 30000)), "a level lasting MinSamples intervals is the new normal")

	// The count survives a restart.
	b, err := r.MarshalBinary()
	require.NoError(t, err)
	n, err := RestoreRecommender(o, b)
	require.NoError(t, err)
	require.Equal(t, o.MinSamples+200, n.errAbove)

}

// TestNoisyHealthyErrorRatioKeepsItsLevels: healthy error ratios of every
// shape (Poisson counts at high and low traffic, errors in a few intervals
// only, a heavy tail) lose only rare excursions to the hold-out, and the
// levels learnt from them stay put over days.
func TestNoisyHealthyErrorRatioKeepsItsLevels(t *testing.T) {
	tests := []struct {
		name  string
		ratio func(*rand.Rand) float64
	}{
		{"high traffic", errorsOf(0.001, 30000)},
		{"low traffic", errorsOf(0.001, 3000)},
		{"sparse errors", errorsOf(0.0001, 3000)},
		{"heavy tail", func(rng *rand.Rand) float64 { return math.Min(0.01, 0.001*math.Exp(0.6*rng.NormFloat64())) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultRecommenderOptions()
			o.MinSamples = 500
			r, err := NewRecommender(o)
			require.NoError(t, err)
			f := &errorFeed{r: r, rng: rand.New(rand.NewPCG(11, 12))}
			f.feed(4000, tt.ratio)
			early := r.Recommend()
			healthy := f.feed(16000, tt.ratio)
			late := r.Recommend()
			t.Logf("healthy %d of 16000; warn %v -> %v, critical %v -> %v, baseline %v -> %v", healthy,
				early.ErrorWarn, late.ErrorWarn, early.ErrorCritical, late.ErrorCritical, early.BaselineErrorRatio, late.BaselineErrorRatio)
			require.Greater(t, healthy, 16000*98/100)
			require.InEpsilon(t, early.ErrorWarn, late.ErrorWarn, 0.1)
		})
	}
}
