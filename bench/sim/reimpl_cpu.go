package sim

import (
	"math"
	"time"
)

// This file RE-IMPLEMENTS the two CPU-gated shedders from their source:
// go-kratos/aegis ratelimit/bbr v0.2.0 and go-zero core/load's adaptive
// shedder v1.10.3. The originals read the wall clock and a process-wide CPU
// sampler, so they cannot run in virtual time; these models keep their
// formulas and defaults and read the simulated server's CPU instead.

// cpuEMA is the CPU sampler both libraries use: every interval,
// cpu = cpu * decay + usage * (1 - decay), in per-mille, starting at 0.
type cpuEMA struct {
	interval time.Duration
	decay    float64
	next     time.Duration
	v        float64
	read     func() float64
}

func (c *cpuEMA) at(now time.Duration) float64 {
	for now >= c.next {
		c.v = c.v*c.decay + c.read()*1000*(1-c.decay)
		c.next += c.interval
	}
	return c.v
}

// buckets is a rolling window of per-bucket sums and counts.
type buckets struct {
	width        time.Duration
	sum, count   []float64
	lastBucketAt int64
}

func newBuckets(n int, width time.Duration) *buckets {
	return &buckets{width: width, sum: make([]float64, n), count: make([]float64, n)}
}

func (b *buckets) advance(now time.Duration) int {
	idx := int64(now / b.width)
	n := int64(len(b.sum))
	if idx-b.lastBucketAt > n {
		b.lastBucketAt = idx - n // a whole window passed: clear every bucket once
	}
	for b.lastBucketAt < idx {
		b.lastBucketAt++
		i := b.lastBucketAt % n
		b.sum[i], b.count[i] = 0, 0
	}
	return int(idx % n)
}

func (b *buckets) add(now time.Duration, v float64) {
	i := b.advance(now)
	b.sum[i] += v
	b.count[i]++
}

// each visits the completed buckets (not the current one).
func (b *buckets) each(now time.Duration, f func(sum, count float64)) {
	cur := b.advance(now)
	for i := range b.sum {
		if i != cur {
			f(b.sum[i], b.count[i])
		}
	}
}

// bbrModel follows aegis BBR: drop when inflight > 1 and inflight >
// maxPass * minRT(ms) * bucketsPerSecond / 1000, while CPU >= 80% or within
// 1 s of the drop that started shedding. 10 s window of 100 buckets, CPU
// sampled every 500 ms with decay 0.95.
type bbrModel struct {
	cpu       cpuEMA
	pass, rt  *buckets
	prevDrop  time.Duration
	dropping  bool
	lastLimit int
}

func newBBRModel(e *Env) (Policy, error) {
	return &bbrModel{
		cpu:  cpuEMA{interval: 500 * time.Millisecond, decay: 0.95, read: e.CPU},
		pass: newBuckets(100, 100*time.Millisecond),
		rt:   newBuckets(100, 100*time.Millisecond),
	}, nil
}

func (m *bbrModel) maxInFlight(now time.Duration) int {
	maxPass, minRT := 1.0, math.MaxFloat64
	m.pass.each(now, func(s, _ float64) { maxPass = math.Max(maxPass, s) })
	m.rt.each(now, func(s, c float64) {
		if c > 0 {
			minRT = math.Min(minRT, s/c)
		}
	})
	if minRT == math.MaxFloat64 {
		minRT = 1
	}
	minRT = math.Max(1, math.Ceil(minRT))
	return int(math.Floor(maxPass*minRT*10/1000) + 0.5)
}

func (m *bbrModel) Admit(now time.Duration, _, inflight int) (any, bool) {
	m.lastLimit = m.maxInFlight(now)
	over := inflight > 1 && inflight > m.lastLimit
	if m.cpu.at(now) < 800 {
		if !m.dropping {
			return nil, true
		}
		if now-m.prevDrop <= time.Second {
			return nil, !over
		}
		m.dropping = false
		return nil, true
	}
	if over && !m.dropping {
		m.dropping, m.prevDrop = true, now
	}
	return nil, !over
}

func (m *bbrModel) Done(_ any, now, rtt time.Duration, _ int, _ bool) {
	if ms := math.Ceil(float64(rtt) / float64(time.Millisecond)); ms > 0 {
		m.rt.add(now, ms)
	}
	m.pass.add(now, 1)
}

func (m *bbrModel) Limit() int { return m.lastLimit }

// goZeroModel follows go-zero's adaptive shedder: when CPU >= 90% (or within
// 1 s of the last time it was, after a drop), drop if both the current and
// the average in-flight exceed maxPass * minRT(ms) * bucketsPerSecond / 1000
// scaled by an overload factor (1000 - cpu) / (1000 - 900) in [0.1, 1].
// 5 s window of 50 buckets; CPU sampled every 250 ms with decay 0.95.
type goZeroModel struct {
	cpu            cpuEMA
	pass, rt       *buckets
	avgFlying      float64
	overloadTime   time.Duration
	droppedRecent  bool
	lastLimit      int
	everOverloaded bool
	inflight       func() int
}

func newGoZeroModel(e *Env) (Policy, error) {
	return &goZeroModel{
		cpu:      cpuEMA{interval: 250 * time.Millisecond, decay: 0.95, read: e.CPU},
		pass:     newBuckets(50, 100*time.Millisecond),
		rt:       newBuckets(50, 100*time.Millisecond),
		inflight: e.Inflight,
	}, nil
}

func (m *goZeroModel) Admit(now time.Duration, _, inflight int) (any, bool) {
	cpu := m.cpu.at(now)
	overloaded := cpu >= 900
	if overloaded {
		m.overloadTime, m.everOverloaded = now, true
	}
	hot := m.droppedRecent && m.everOverloaded && now-m.overloadTime < time.Second
	if !overloaded && !hot {
		return nil, true
	}
	maxPass, minRT := 1.0, 1000.0
	m.pass.each(now, func(s, _ float64) { maxPass = math.Max(maxPass, s) })
	m.rt.each(now, func(s, c float64) {
		if c > 0 {
			minRT = math.Min(minRT, math.Round(s/c))
		}
	})
	factor := math.Max(0.1, math.Min(1, (1000-cpu)/(1000-900)))
	maxFlight := math.Max(1, maxPass*minRT*10/1000) * factor
	m.lastLimit = int(maxFlight)
	if m.avgFlying > maxFlight && float64(inflight) > maxFlight {
		m.droppedRecent = true
		return nil, false
	}
	return nil, true
}

func (m *goZeroModel) Done(_ any, now, rtt time.Duration, _ int, _ bool) {
	m.avgFlying = m.avgFlying*0.9 + float64(m.inflight())*0.1
	m.rt.add(now, float64(rtt/time.Millisecond))
	m.pass.add(now, 1)
}

func (m *goZeroModel) Limit() int { return m.lastLimit }
