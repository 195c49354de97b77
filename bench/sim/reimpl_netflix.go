package sim

import (
	"math"
	"time"
)

// This file re-implements Netflix concurrency-limits' Gradient2Limit and
// VegasLimit from their published source and formulas (Java,
// github.com/Netflix/concurrency-limits), with their default parameters.
// They are RE-IMPLEMENTATIONS for comparison, not Netflix's code.

// gradient2 is Gradient2Limit behind a WindowedLimit (1 s windows of at
// least 10 samples, average RTT), Netflix's documented setup.
type gradient2 struct {
	limit, minLimit, maxLimit float64
	smoothing, tolerance      float64
	longRTT                   ewma
	win                       window
}

func newGradient2() *gradient2 {
	return &gradient2{limit: 20, minLimit: 20, maxLimit: 200, smoothing: 0.2, tolerance: 1.5,
		longRTT: ewma{n: 600}, win: window{length: time.Second, minSamples: 10}}
}

func (g *gradient2) Admit(_ time.Duration, _, inflight int) (any, bool) {
	return nil, inflight < int(g.limit)
}
func (g *gradient2) Limit() int { return int(g.limit) }

func (g *gradient2) Done(_ any, now, rtt time.Duration, inflight int, dropped bool) {
	avg, maxInflight, drop, ok := g.win.add(now, rtt, inflight, dropped)
	if !ok {
		return
	}
	_ = drop // Gradient2 ignores drops
	short := avg
	long := g.longRTT.add(short)
	// Speed up recovery of the long-term RTT when the short-term one falls.
	if long/short > 2 {
		long *= 0.95
		g.longRTT.v = long
	}
	// App-limited: do not grow while less than half the limit is used.
	if float64(maxInflight) < g.limit/2 {
		return
	}
	gradient := math.Max(0.5, math.Min(1, g.tolerance*long/short))
	const queueSize = 4
	newLimit := g.limit*gradient + queueSize
	newLimit = g.limit*(1-g.smoothing) + newLimit*g.smoothing
	g.limit = math.Max(g.minLimit, math.Min(g.maxLimit, newLimit))
}

// vegas is VegasLimit with its defaults (initial 20, max 1000, alpha 3 log10,
// beta 6 log10, threshold log10, probe multiplier 30), updated per sample.
type vegas struct {
	limit, maxLimit float64
	noLoad          float64
	probeCount      int
	probeJitter     float64
	jit             uint64
}

func newVegas() *vegas { v := &vegas{limit: 20, maxLimit: 1000, jit: 1}; v.newJitter(); return v }

func (v *vegas) newJitter() {
	// A deterministic xorshift stands in for ThreadLocalRandom (0.5..1).
	v.jit ^= v.jit << 13
	v.jit ^= v.jit >> 7
	v.jit ^= v.jit << 17
	v.probeJitter = 0.5 + float64(v.jit%1000)/2000
}

func log10Root(l float64) float64 { return math.Max(1, math.Floor(math.Log10(l))) }

func (v *vegas) Admit(_ time.Duration, _, inflight int) (any, bool) {
	return nil, inflight < int(v.limit)
}
func (v *vegas) Limit() int { return int(v.limit) }

func (v *vegas) Done(_ any, _, rttD time.Duration, inflight int, dropped bool) {
	rtt := float64(rttD)
	if rtt <= 0 {
		return
	}
	v.probeCount++
	if v.probeJitter*30*v.limit <= float64(v.probeCount) {
		v.newJitter()
		v.probeCount = 0
		v.noLoad = rtt
		return
	}
	if v.noLoad == 0 || rtt < v.noLoad {
		v.noLoad = rtt
		return
	}
	l := v.limit
	queue := math.Ceil(l * (1 - v.noLoad/rtt))
	lg := log10Root(l)
	var n float64
	switch {
	case dropped:
		n = l - lg
	case float64(inflight)*2 < l:
		return
	case queue <= lg:
		n = l + 6*lg
	case queue < 3*lg:
		n = l + lg
	case queue > 6*lg:
		n = l - lg
	default:
		return
	}
	v.limit = math.Max(1, math.Min(v.maxLimit, n))
}

// ewma is the exponential moving average over n samples Netflix uses
// (simple average for the first n samples' warm-up is approximated by
// starting at the first sample).
type ewma struct {
	n float64
	v float64
}

func (e *ewma) add(x float64) float64 {
	if e.v == 0 {
		e.v = x
	} else {
		f := 2 / (e.n + 1)
		e.v = e.v*(1-f) + x*f
	}
	return e.v
}

// window aggregates samples into fixed-length windows with a minimum count.
type window struct {
	length      time.Duration
	minSamples  int
	start       time.Duration
	sum         float64
	count       int
	maxInflight int
	dropped     bool
}

func (w *window) add(now, rtt time.Duration, inflight int, dropped bool) (avg float64, maxInflight int, drop, ok bool) {
	w.sum += float64(rtt)
	w.count++
	w.maxInflight = max(w.maxInflight, inflight)
	w.dropped = w.dropped || dropped
	if now-w.start < w.length || w.count < w.minSamples {
		return 0, 0, false, false
	}
	avg, maxInflight, drop = w.sum/float64(w.count), w.maxInflight, w.dropped
	*w = window{length: w.length, minSamples: w.minSamples, start: now}
	return avg, maxInflight, drop, true
}
