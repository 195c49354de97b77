package balancer

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Defaults for the fields of Ejection left at zero, as Envoy's outlier
// detection.
const (
	DefaultEjectionBaseTime = 30 * time.Second
	DefaultEjectionMaxTime  = 300 * time.Second
	// DefaultEjectionMaxShare is the largest share of endpoints ejected at
	// once when Ejection.MaxShare is unset, as Envoy's
	// max_ejection_percent.
	DefaultEjectionMaxShare = 0.1
)

// Ejection configures outlier ejection. Its zero value ejects only through
// the endpoints' breakers (Options.Breaker), at most 10% of the endpoints
// at once.
type Ejection struct {
	// ConsecutiveFailures ejects an endpoint once this many of its calls
	// in a row have failed (Done with failed set), as Envoy's
	// consecutive_5xx; a success starts the count again. 0 (default)
	// turns it off.
	ConsecutiveFailures int
	// BaseTime is how long an endpoint is ejected for consecutive
	// failures the first time; the n-th ejection in a row lasts
	// n x BaseTime, up to MaxTime. Each BaseTime the endpoint then spends
	// in rotation without being ejected forgets one ejection. The endpoint
	// returns when the time is up, with no probe and with a slow start
	// (rules.Balancer.SlowStart): if it still fails, it is ejected again,
	// for longer. Default 30s.
	BaseTime time.Duration
	// MaxTime caps the time of one consecutive-failure ejection; default
	// 300s, and never below BaseTime.
	MaxTime time.Duration
	// MaxShare is the largest share of the endpoints, in (0, 1], that may
	// be ejected at once, by consecutive failures and by open breakers
	// alike; at least one endpoint may always be ejected. An ejection over
	// the cap does not happen: Ejected does not list the endpoint and it
	// keeps getting its share of calls (a consecutive-failure ejection is
	// not made, and its count starts again; calls to an endpoint whose
	// open breaker is over the cap go around the breaker, as panic picks
	// do). SkippedEjections counts the refusals. Default (0) 0.1; 1 turns
	// the cap off.
	MaxShare float64
}

// check validates e and fills in its defaults.
func (e Ejection) check() (Ejection, error) {
	switch {
	case e.ConsecutiveFailures < 0:
		return e, fmt.Errorf("%w: Ejection.ConsecutiveFailures must not be negative, got %d", ErrInvalidConfig, e.ConsecutiveFailures)
	case e.BaseTime < 0:
		return e, fmt.Errorf("%w: Ejection.BaseTime must not be negative, got %s", ErrInvalidConfig, e.BaseTime)
	case e.MaxTime < 0:
		return e, fmt.Errorf("%w: Ejection.MaxTime must not be negative, got %s", ErrInvalidConfig, e.MaxTime)
	case math.IsNaN(e.MaxShare) || e.MaxShare < 0 || e.MaxShare > 1:
		return e, fmt.Errorf("%w: Ejection.MaxShare must be between 0 and 1, got %v", ErrInvalidConfig, e.MaxShare)
	}
	if e.BaseTime == 0 {
		e.BaseTime = DefaultEjectionBaseTime
	}
	if e.MaxTime == 0 {
		e.MaxTime = DefaultEjectionMaxTime
	}
	e.MaxTime = max(e.MaxTime, e.BaseTime)
	if e.MaxShare == 0 {
		e.MaxShare = DefaultEjectionMaxShare
	}
	return e, nil
}

// maxEjected is how many of n endpoints may be ejected at once: MaxShare
// of them rounded down, at least one.
func (b *Balancer) maxEjected(n int) int {
	// The small addition keeps a share such as 0.3 of 10 at 3, not 2.
	return max(1, int(b.ej.MaxShare*float64(n)+1e-9))
}

// out reports whether e is ejected at now: by consecutive failures, or by
// an open breaker that the ejection cap admits.
func (b *Balancer) out(e *Endpoint, now int64, l *list) bool {
	if b.failedOut(e, now) {
		return true
	}
	until, open := e.breakerOpen(now)
	return open && b.honoured(e, until, now, l)
}

// overCap reports whether e's breaker is open but the ejection cap refused
// its ejection, so calls go to it around the breaker.
func (b *Balancer) overCap(e *Endpoint, now int64, l *list) bool {
	if b.failedOut(e, now) {
		return false
	}
	until, open := e.breakerOpen(now)
	return open && !b.honoured(e, until, now, l)
}

// failedOut reports whether e is ejected for consecutive failures at now.
func (b *Balancer) failedOut(e *Endpoint, now int64) bool {
	return b.ej.ConsecutiveFailures > 0 && e.outUntil.Load() > now
}

// honoured reports whether the ejection cap admits the breaker opening of
// e that lasts until; an opening not yet judged against the cap is judged
// here.
func (b *Balancer) honoured(e *Endpoint, until, now int64, l *list) bool {
	switch e.seen.Load() {
	case until:
		return true
	case -until:
		return false
	}
	return b.judge(e, until, now, l)
}

// judge decides whether the breaker opening of e that lasts until fits
// under the ejection cap, and remembers the answer.
func (b *Balancer) judge(e *Endpoint, until, now int64, l *list) bool {
	b.ejMu.Lock()
	defer b.ejMu.Unlock()
	switch e.seen.Load() {
	case until:
		return true
	case -until:
		return false
	}
	if !b.room(l.eps, e, now) {
		e.seen.Store(-until)
		b.skipped.Add(1)
		return false
	}
	e.seen.Store(until)
	return true
}

// room reports whether one more endpoint, e, may be ejected from eps at
// now; b.ejMu must be held.
func (b *Balancer) room(eps []*Endpoint, e *Endpoint, now int64) bool {
	n := 0
	for _, o := range eps {
		if o == e {
			continue
		}
		if b.failedOut(o, now) {
			n++
		} else if until, open := o.breakerOpen(now); open && o.seen.Load() == until {
			n++
		}
	}
	return n < b.maxEjected(len(eps))
}

// failed counts a failed call of e and ejects it once the failures in a
// row reach Ejection.ConsecutiveFailures.
func (b *Balancer) failed(e *Endpoint, now int64) {
	if e.fails.Add(1) < int64(b.ej.ConsecutiveFailures) {
		return
	}
	b.ejMu.Lock()
	defer b.ejMu.Unlock()
	if e.fails.Load() < int64(b.ej.ConsecutiveFailures) {
		return // another failure's call got here first
	}
	e.fails.Store(0) // ejected or refused: the count starts again
	last := e.outUntil.Load()
	if last > now {
		return // already ejected (a panic pick failed)
	}
	l := b.eps.Load()
	if !slices.Contains(l.eps, e) {
		return // removed from the list
	}
	if !b.room(l.eps, e, now) {
		b.skipped.Add(1)
		return
	}
	base, top := int64(b.ej.BaseTime), int64(b.ej.MaxTime)
	if last > 0 {
		// Each base time spent in rotation since the last ejection ended
		// forgets one ejection.
		e.times -= int(min(int64(e.times), (now-last)/base))
	}
	e.times = min(e.times+1, int((top+base-1)/base)) // past the cap more count for nothing
	until := now + min(int64(e.times)*base, top)
	e.since.Store(until) // it returns with a slow start
	e.outUntil.Store(until)
	b.changes.Add(1) // the healthy count for panic mode must follow
}

// SkippedEjections returns how many ejections the ejection cap
// (Ejection.MaxShare) has refused, for consecutive failures and open
// breakers alike. It only grows.
func (b *Balancer) SkippedEjections() uint64 { return b.skipped.Load() }
