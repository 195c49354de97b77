package breaker

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"governor.dev/governor/sdk/breaker/window"
	"governor.dev/governor/sdk/rules"
)

// Counters of the breaker's window.
const (
	cCalls = 0
	cFails = 1
	cSlow  = 2
)

// Breaker is the closed / open / half-open circuit breaker. Build it with New
// (kind "breaker"); it is safe for concurrent use.
type Breaker struct {
	// word packs the generation (high bits) and the state (low two bits) so
	// Allow reads both with one load. A Ticket is the word that admitted it.
	word      atomic.Uint64
	openUntil atomic.Int64
	// slots packs the half-open round (the low 32 bits of its generation)
	// above the number of probes handed out in it, so a call takes a slot
	// only of the round whose word it read.
	slots atomic.Uint64
	// lastProbe is when the current half-open round handed out its latest
	// probe, or began if it has handed out none: once a window has passed
	// since, every probe still out has been out for a whole window.
	lastProbe atomic.Int64
	// handed is how many slots of the current round were ever taken (the
	// high-water mark of the count in slots): a slot taken again after a
	// Release (its caller gave up) is no new probe and leaves lastProbe as
	// it is, so callers that give up on a hanging dependency do not keep
	// the round from ending.
	handed atomic.Int64

	ring *window.Ring

	minCalls    int64
	errorRatio  float64
	slowRatio   float64
	slowOn      bool
	slowCall    time.Duration
	openBase    time.Duration
	openMax     time.Duration
	probes      int64
	probeWindow int64

	mu sync.Mutex // serialises state changes
	// opens remembers recent openings for the back-off: the next open period
	// is openBase x 2^opens, once opens has lost one for every openMax spent
	// closed since closedAt. It stops at maxOpens, the first value whose
	// period reaches openMax.
	opens     int
	maxOpens  int
	closedAt  int64
	probeOK   int64
	probeBad  int64 // failed probes
	probeSlow int64
	// expired is the word of the last half-open round that expire ended
	// with probes still out.
	expired uint64

	onChange func(from, to State)

	// Test hooks, nil outside tests. beforeSlot runs in Allow between reading
	// a half-open word and taking a probe slot; beforePublish runs in
	// transition, under the lock, just before the new word is stored.
	beforeSlot    func()
	beforePublish func()
}

var _ Guard = (*Breaker)(nil)

func newBreaker(c rules.Breaker, opts Options) *Breaker {
	b := &Breaker{
		ring:        window.New(c.Window.D(), window.DefaultBuckets),
		minCalls:    int64(c.MinCalls),
		errorRatio:  c.ErrorRatio,
		slowRatio:   c.SlowCallRatio,
		slowOn:      c.SlowCallRatio < 1,
		slowCall:    c.SlowCall.D(),
		openBase:    c.OpenBase.D(),
		openMax:     c.OpenMax.D(),
		probes:      min(int64(c.HalfOpenProbes), math.MaxUint32), // the count in slots has 32 bits
		probeWindow: int64(c.Window.D()),
		onChange:    opts.OnStateChange,
	}
	for d := b.openBase; d < b.openMax && d <= math.MaxInt64/2; d *= 2 {
		b.maxOpens++
	}
	b.word.Store(1<<2 | uint64(Closed))
	return b
}

func stateOf(w uint64) State { return State(w & 3) }

// roundOf returns the half-open round of w as slots holds it, in the high
// 32 bits. Two rounds collide only 2^32 generations apart, far more state
// changes than a call can sleep through between reading slots and taking one.
func roundOf(w uint64) uint64 { return w >> 2 << 32 }

// Allow reports whether a call may start at now. While closed it costs one
// atomic load.
func (b *Breaker) Allow(now int64) (Ticket, error) {
	for range 4 {
		w := b.word.Load()
		switch stateOf(w) {
		case Closed:
			return Ticket(w), nil
		case Open:
			if now < b.openUntil.Load() {
				return 0, ErrOpen
			}
			b.transition(w, HalfOpen, now)
		case HalfOpen:
			if b.beforeSlot != nil {
				b.beforeSlot()
			}
			if r := b.takeSlot(w, now); r != slotsFull {
				if r == slotTaken && b.word.Load() == w {
					return Ticket(w), nil
				}
				// The round ended, before or after we took one of its slots
				// (which no later round reads): try the state that followed.
				continue
			}
			switch b.expire(w, now) {
			case roundGone:
				continue // the full round ended while we looked
			case roundRunning:
				return 0, ErrOpen
			}
			// The round ended on its verdict (most likely open): look again.
		}
	}
	return 0, ErrOpen
}

// Results of expire.
const (
	roundRunning = iota // the round is within its window: wait for its probes
	roundGone           // another goroutine ended the round first
	roundExpired        // expire ended the round
)

// expire ends the half-open round of w, every probe of which is handed out,
// once the latest probe has been out for a whole window (and so has every
// other probe still out): a dependency that hangs returns nothing within the
// window, so the probes still out count as failed and the round ends on the
// usual verdict, which is Open with the next, longer, open
// period (or Closed, if the probes that did report are enough). Starting a
// fresh round instead kept the breaker half-open for as long as the
// dependency hung: each round was replaced before its probes timed out, and
// their failures, reported to a round that had ended, counted for nothing.
// The window runs from each probe's start, not the round's: with sparse
// traffic a round's last probes can go out just before a window has passed
// since it began, and a healthy dependency answering them in the usual time
// must not reopen the breaker. The round is remembered in expired: a probe
// of it that succeeds after all ends the open period that followed it early
// (see recordProbe).
func (b *Breaker) expire(w uint64, now int64) int {
	b.mu.Lock()
	switch {
	case b.word.Load() != w:
		b.mu.Unlock()
		return roundGone
	case now-b.lastProbe.Load() < b.probeWindow:
		b.mu.Unlock()
		return roundRunning
	}
	b.probeBad += max(b.probes-b.probeOK-b.probeBad, 0)
	to := b.verdict()
	if to == HalfOpen { // unreachable: every probe has a result now
		to = Open
	}
	b.expired = w
	from := b.transitionLocked(w, to, now)
	b.mu.Unlock()
	b.changed(from, to)
	return roundExpired
}

// Results of takeSlot.
const (
	slotTaken     = iota
	slotsFull     // every probe of the round is out
	slotRoundGone // the slots already belong to a later round
)

// takeSlot takes, at now, a probe slot of the half-open round of w. It never
// takes a slot of another round: transition stores a round's slots before its
// word, so a call that read w finds the slots of w's round or of a later one.
//
// It raises lastProbe to now before it takes a slot never taken before in
// the round (beyond handed; a slot taken again after a Release is no new
// probe), so a call that finds the slots full afterwards sees the time of
// the probe that filled them. A call that loses the slot to another, or
// finds the round ended in between, may leave its own now there: about the
// time of a probe that did go out, which only delays expire by as much; one
// whose round ended just after it took the slot may raise handed of the
// next round, whose first probes then leave lastProbe at the round's start,
// as before handed existed.
func (b *Breaker) takeSlot(w uint64, now int64) int {
	round := roundOf(w)
	for {
		s := b.slots.Load()
		switch {
		case s&^math.MaxUint32 != round:
			return slotRoundGone
		case int64(s&math.MaxUint32) >= b.probes:
			return slotsFull
		}
		n := int64(s&math.MaxUint32) + 1
		fresh := n > b.handed.Load()
		if fresh {
			for last := b.lastProbe.Load(); now > last && !b.lastProbe.CompareAndSwap(last, now); {
				last = b.lastProbe.Load()
			}
		}
		if b.slots.CompareAndSwap(s, s+1) {
			for h := b.handed.Load(); fresh && n > h && !b.handed.CompareAndSwap(h, n); {
				h = b.handed.Load()
			}
			return slotTaken
		}
	}
}

// Record reports the outcome of a call admitted with t. Outcomes of calls
// admitted in an earlier generation are ignored.
func (b *Breaker) Record(t Ticket, now int64, latency time.Duration, failed bool) {
	if t == 0 {
		return
	}
	w := uint64(t)
	slow := b.slowOn && latency >= b.slowCall
	switch stateOf(w) {
	case Closed:
		if b.word.Load() != w {
			return
		}
		var f int64
		if failed {
			f = 1
		}
		b.ring.Add2(now, cCalls, 1, cFails, f)
		if slow {
			b.ring.Add(now, cSlow, 1)
		}
		if failed || slow {
			b.evaluate(w, now)
		}
	case HalfOpen:
		b.recordProbe(w, now, failed, slow)
	}
}

// Release gives back what Allow took for a call admitted with t that ends
// without an outcome (the caller cancelled it, or it was never made). While
// closed nothing was taken and nothing is recorded. A half-open probe gives
// its slot back to its round, so another call can probe in its place; a probe
// of a round that has ended gives nothing, and no round's count goes below
// zero. Call Release instead of Record, never both.
func (b *Breaker) Release(t Ticket) {
	w := uint64(t)
	if t == 0 || stateOf(w) != HalfOpen {
		return
	}
	round := roundOf(w)
	for {
		s := b.slots.Load()
		if s&^math.MaxUint32 != round || s&math.MaxUint32 == 0 {
			return
		}
		if b.slots.CompareAndSwap(s, s-1) {
			return
		}
	}
}

func (b *Breaker) evaluate(w uint64, now int64) {
	s := b.ring.Sum(now)
	calls := s[cCalls]
	if calls < b.minCalls || calls <= 0 {
		return
	}
	if float64(s[cFails]) >= b.errorRatio*float64(calls) ||
		(b.slowOn && float64(s[cSlow]) >= b.slowRatio*float64(calls)) {
		b.transition(w, Open, now)
	}
}

func (b *Breaker) recordProbe(w uint64, now int64, failed, slow bool) {
	b.mu.Lock()
	if cur := b.word.Load(); cur != w {
		// A probe of a round that expire ended, counted as failed, has
		// succeeded after all: the dependency answers again, so the open
		// period that round's verdict began ends now and the next Allow
		// probes afresh. Only while that very open period lasts (the
		// generation right after the round's), and only for a success that
		// the round would have counted as one; the back-off keeps its step.
		if !failed && !slow && w == b.expired && cur == (w>>2+1)<<2|uint64(Open) &&
			now < b.openUntil.Load() {
			b.openUntil.Store(now)
		}
		b.mu.Unlock()
		return
	}
	switch {
	case failed:
		b.probeBad++
	default:
		b.probeOK++
	}
	if slow {
		b.probeSlow++
	}
	to := b.verdict()
	var from State
	if to != HalfOpen {
		from = b.transitionLocked(w, to, now)
	}
	b.mu.Unlock()
	if to != HalfOpen {
		b.changed(from, to)
	}
}

// verdict returns the state the probe results so far call for: Open once
// enough failed or were slow, Closed once every probe succeeded otherwise,
// HalfOpen while results are missing. The caller holds mu.
func (b *Breaker) verdict() State {
	n := float64(b.probes)
	switch {
	case float64(b.probeBad) >= b.errorRatio*n,
		b.slowOn && float64(b.probeSlow) >= b.slowRatio*n:
		return Open
	case b.probeOK+b.probeBad >= b.probes:
		return Closed
	}
	return HalfOpen
}

// transition moves from the generation w to state to, unless another
// goroutine changed the state first. The hook runs after the lock is released.
func (b *Breaker) transition(w uint64, to State, now int64) {
	b.mu.Lock()
	from := b.transitionLocked(w, to, now)
	b.mu.Unlock()
	b.changed(from, to)
}

// changed runs the state-change hook for a move from from to to; from is -1
// when nothing moved.
func (b *Breaker) changed(from, to State) {
	if b.onChange != nil && from >= 0 && from != to {
		b.onChange(from, to)
	}
}

// transitionLocked is transition with mu held and without the hook. It
// returns the state it moved from, or -1 if w is no longer current.
func (b *Breaker) transitionLocked(w uint64, to State, now int64) State {
	if b.word.Load() != w {
		return -1
	}
	from := stateOf(w)
	next := (w>>2+1)<<2 | uint64(to)
	switch to {
	case Open:
		if from == Closed && b.opens > 0 {
			// Each openMax spent closed halves the memory of openings.
			healthy := max(now-b.closedAt, 0) / int64(b.openMax)
			b.opens -= int(min(healthy, int64(b.opens)))
		}
		d := b.openBase
		for range b.opens {
			if d > b.openMax/2 {
				d = b.openMax
				break
			}
			d *= 2
		}
		b.opens = min(b.opens+1, b.maxOpens)
		b.openUntil.Store(now + int64(min(d, b.openMax)))
	case HalfOpen:
		b.probeOK, b.probeBad, b.probeSlow = 0, 0, 0
		b.lastProbe.Store(now)
		b.handed.Store(0)
		b.slots.Store(roundOf(next)) // before the word: see takeSlot
	case Closed:
		b.closedAt = now
		b.ring.Reset()
	}
	if b.beforePublish != nil {
		b.beforePublish()
	}
	b.word.Store(next)
	return from
}

// State returns the state at now. An open breaker whose open period has
// passed reports HalfOpen: the next Allow lets probes through.
func (b *Breaker) State(now int64) State {
	s := stateOf(b.word.Load())
	if s == Open && now >= b.openUntil.Load() {
		return HalfOpen
	}
	return s
}

// OpenUntil returns when the current open period ends (monotonic
// nanoseconds); it is meaningful only while the breaker is open.
func (b *Breaker) OpenUntil() int64 { return b.openUntil.Load() }
