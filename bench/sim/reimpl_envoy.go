package sim

import (
	"math"
	"slices"
	"time"
)

// envoyGradient RE-IMPLEMENTS Envoy's adaptive concurrency filter (gradient
// controller) from its documented formulas and defaults: every 100 ms,
// gradient = clamp(minRTT * (1 + buffer) / sampleRTT, 0.5, 2) with sampleRTT
// the window's p50 and buffer 25%, and limit = limit * gradient +
// sqrt(limit * gradient), at most 1000. The min RTT is measured at start and
// every 60 s (±15% jitter) by pinning the limit to 3 until 50 requests have
// completed, taking their p50. It is not Envoy's code.
type envoyGradient struct {
	limit     float64
	minRTT    float64
	samples   []float64
	winStart  time.Duration
	measuring bool
	nextProbe time.Duration
	jit       uint64
}

const (
	envoyInterval    = 100 * time.Millisecond
	envoyMinRTTEvery = 60 * time.Second
	envoyProbeLimit  = 3
	envoyProbeCount  = 50
	envoyBuffer      = 0.25
	envoyMaxLimit    = 1000
)

func newEnvoy(*Env) (Policy, error) {
	return &envoyGradient{limit: envoyProbeLimit, measuring: true, jit: 7}, nil
}

func (e *envoyGradient) current() int {
	if e.measuring {
		return envoyProbeLimit
	}
	return int(e.limit)
}

func (e *envoyGradient) Admit(now time.Duration, _, inflight int) (any, bool) {
	if !e.measuring && now >= e.nextProbe {
		e.measuring = true
		e.samples = e.samples[:0]
	}
	return nil, inflight < e.current()
}

func (e *envoyGradient) Limit() int { return e.current() }

func (e *envoyGradient) Done(_ any, now, rtt time.Duration, _ int, _ bool) {
	e.samples = append(e.samples, float64(rtt))
	if e.measuring {
		if len(e.samples) < envoyProbeCount {
			return
		}
		e.minRTT = p50(e.samples)
		e.samples = e.samples[:0]
		e.measuring = false
		e.limit = max(e.limit, envoyProbeLimit)
		e.jit = e.jit*6364136223846793005 + 1442695040888963407
		j := 1 + 0.15*(float64(e.jit>>11)/float64(1<<53)*2-1)
		e.nextProbe = now + time.Duration(float64(envoyMinRTTEvery)*j)
		e.winStart = now
		return
	}
	if now-e.winStart < envoyInterval {
		return
	}
	e.winStart = now
	sample := p50(e.samples)
	e.samples = e.samples[:0]
	g := math.Max(0.5, math.Min(2, e.minRTT*(1+envoyBuffer)/sample))
	l := e.limit * g
	e.limit = math.Max(envoyProbeLimit, math.Min(envoyMaxLimit, l+math.Sqrt(l)))
}

func p50(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
