package thresholds

import (
	"math"
	"time"
)

// seasonal keeps one robust level per phase bin of a period (a daily
// profile, say) and a shared spread of the residuals from that profile.
type seasonal struct {
	period  int64 // nanoseconds
	width   int64 // nanoseconds per bin
	alpha   float64
	level   []float64
	seen    []bool
	resid   robust  // residual spread; mean unused
	sum     float64 // sum of the levels of seen bins
	nseen   int
	start   int64
	started bool
}

func newSeasonal(period time.Duration, bins int, halfLife, spreadAlpha float64) *seasonal {
	return &seasonal{
		period: int64(period),
		width:  max(int64(period)/int64(bins), 1),
		alpha:  halfLifeAlpha(halfLife),
		level:  make([]float64, bins),
		seen:   make([]bool, bins),
		resid:  robust{alpha: spreadAlpha},
	}
}

func (s *seasonal) bin(t int64) int {
	ph := t % s.period
	if ph < 0 {
		ph += s.period
	}
	return min(int(ph/s.width), len(s.level)-1)
}

// ready reports whether a full period has been seen.
func (s *seasonal) ready(t int64) bool { return s.started && t-s.start >= s.period }

// has reports whether t's bin has a level.
func (s *seasonal) has(t int64) bool { return s.seen[s.bin(t)] }

// residual is x minus the bin's level; ok is false if the bin is empty.
func (s *seasonal) residual(t int64, x float64) (r float64, ok bool) {
	b := s.bin(t)
	if !s.seen[b] {
		return 0, false
	}
	return x - s.level[b], true
}

func (s *seasonal) update(t int64, x, clip float64) {
	if !s.started {
		s.started, s.start = true, t
	}
	b := s.bin(t)
	if !s.seen[b] {
		s.seen[b], s.level[b] = true, x
		s.sum += x
		s.nseen++
		return
	}
	d := x - s.level[b]
	if s.resid.n > 8 {
		lim := clip * s.resid.spread()
		d = math.Max(-lim, math.Min(lim, d))
	}
	s.resid.update(d, clip)
	s.level[b] += s.alpha * d
	s.sum += s.alpha * d
}

// offset is the bin's level minus the mean level of all bins: what the
// season adds at time t. ok is false if the bin is empty.
func (s *seasonal) offset(t int64) (float64, bool) {
	b := s.bin(t)
	if !s.seen[b] {
		return 0, false
	}
	return s.level[b] - s.sum/float64(s.nseen), true
}
