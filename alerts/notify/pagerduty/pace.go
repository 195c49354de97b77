package pagerduty

import (
	"maps"
	"slices"
	"sync"
	"time"
)

// DefaultEventsPerMinute is PagerDuty's documented Events API v2 limit per
// routing key.
const DefaultEventsPerMinute = 120

// pacer is a token bucket for one routing key, shared by every notifier
// (receiver) and group that sends with that key: PagerDuty counts the
// key's events, not a receiver's. Its burst and rate keep any minute
// within the limit (burst + 60 s of refill = the limit), so a storm is
// paced before PagerDuty answers 429 rather than after.
//
// Tokens may go negative: a reservation takes its token at once and
// returns the time its event may go, so concurrent senders queue in the
// order they reserved. Events of P1 and P2 alerts leave urgentReserve
// tokens to P0 events, so a P0 page finds room in the bucket while a storm
// of lesser alerts drains it. Times are arguments, so the caller's clock
// (an injected one in tests) drives the bucket.
//
// The limit is the lowest events_per_minute of the notifiers sending with
// the key (users), so receivers that disagree stay within the stricter,
// and a notifier built but never used (a configuration that failed to
// apply) changes nothing.
type pacer struct {
	// users counts the notifiers sending with the key by their limit;
	// pacers held.
	users map[int]int

	mu            sync.Mutex
	perMinute     int // the limit in force
	perSecond     float64
	burst         float64
	urgentReserve float64
	tokens        float64   // at time at
	at            time.Time // may be in the future after a Retry-After
}

// setLimit sets the bucket for perMinute events in any minute.
func (p *pacer) setLimit(perMinute int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.perMinute = perMinute
	burst := max(perMinute/6, 1)
	p.burst = float64(burst)
	p.perSecond = float64(max(perMinute-burst, 1)) / 60
	p.urgentReserve = float64(burst / 4)
	p.tokens = min(p.tokens, p.burst)
}

// refill brings the bucket to now; p.mu held.
func (p *pacer) refill(now time.Time) {
	if p.at.IsZero() {
		p.tokens, p.at = p.burst, now
		return
	}
	if now.After(p.at) {
		p.tokens = min(p.burst, p.tokens+now.Sub(p.at).Seconds()*p.perSecond)
		p.at = now
	}
}

// reserve takes a token for one event and returns when the event may be
// sent (now or later). When that is after by (by zero: no bound), it takes
// nothing and returns ok false with the time the event could go.
func (p *pacer) reserve(now, by time.Time, urgent bool) (slot time.Time, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refill(now)
	floor := p.urgentReserve
	if urgent {
		floor = 0
	}
	left := p.tokens - 1
	slot = p.at
	if left < floor {
		slot = slot.Add(time.Duration((floor - left) / p.perSecond * float64(time.Second)))
	}
	if !by.IsZero() && slot.After(by) {
		return slot, false
	}
	p.tokens = left
	return slot, true
}

// refused records a 429 from PagerDuty at now: the key's window is used
// up, so the bucket is emptied, and with a Retry-After (wait > 0) no event
// of the key goes before now+wait, when one may go at once.
func (p *pacer) refused(now time.Time, wait time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refill(now)
	if wait <= 0 {
		p.tokens = min(p.tokens, 0)
		return
	}
	// PagerDuty named the time the key may send again: one event may go
	// then, the rest are paced after it.
	p.tokens = min(p.tokens, 1)
	if until := now.Add(wait); until.After(p.at) {
		p.at = until
	}
}

// limit returns the events per minute the bucket keeps to.
func (p *pacer) limit() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.perMinute
}

// idle reports whether the bucket is as a new one would be at now: full,
// with no Retry-After pending.
func (p *pacer) idle(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.at.IsZero() {
		return true
	}
	return !p.at.After(now) && p.tokens+now.Sub(p.at).Seconds()*p.perSecond >= p.burst
}

// pacers holds the bucket of each endpoint and routing key of the process.
// It is process-wide on purpose: PagerDuty limits the key whichever
// receiver uses it, and a configuration reload, which builds new
// notifiers, must not hand a storm a fresh burst nor forget a Retry-After.
// A bucket that no notifier uses any more is forgotten once it is idle (a
// new one would be the same), so rotated keys do not pile up.
var pacers = struct {
	sync.Mutex
	m map[string]*pacer
}{m: map[string]*pacer{}}

// acquire returns the bucket of url and routing key for a notifier of
// perMinute events that starts sending at now; release gives it back.
// It forgets the idle buckets of keys no notifier uses.
func acquire(url, routingKey string, perMinute int, now time.Time) *pacer {
	pacers.Lock()
	defer pacers.Unlock()
	k := url + "\x00" + routingKey
	maps.DeleteFunc(pacers.m, func(key string, p *pacer) bool { return key != k && len(p.users) == 0 && p.idle(now) })
	p := pacers.m[k]
	if p == nil {
		p = &pacer{users: map[int]int{}}
		pacers.m[k] = p
	}
	p.users[perMinute]++
	p.setLimit(slices.Min(slices.Collect(maps.Keys(p.users))))
	return p
}

// release gives back the bucket a notifier of perMinute events acquired.
func (p *pacer) release(perMinute int) {
	pacers.Lock()
	defer pacers.Unlock()
	if p.users[perMinute]--; p.users[perMinute] <= 0 {
		delete(p.users, perMinute)
	}
	if len(p.users) > 0 {
		p.setLimit(slices.Min(slices.Collect(maps.Keys(p.users))))
	}
}
