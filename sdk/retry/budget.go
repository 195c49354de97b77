package retry

import (
	"sync"
	"time"

	"governor.dev/governor/sdk/breaker/window"
)

// Counters of the budget's window.
const (
	cRequests = 0
	cRetries  = 1
)

// Budget caps retries at a share of requests over a sliding window: a retry
// is allowed while retries < ratio x requests + minPerSecond x window. It is
// safe for concurrent use; counting a request is one uncontended atomic add.
type Budget struct {
	ring  *window.Ring
	ratio float64
	floor float64

	mu sync.Mutex // makes check-and-spend of a retry atomic
}

// NewBudget returns a budget letting retries be ratio of the requests in the
// window (DefaultBudgetWindow if <= 0), plus minPerSecond retries per second.
func NewBudget(ratio, minPerSecond float64, win time.Duration) *Budget {
	if win <= 0 {
		win = DefaultBudgetWindow
	}
	r := window.New(win, 0)
	return &Budget{ring: r, ratio: ratio, floor: minPerSecond * r.Window().Seconds()}
}

// Request counts a first attempt at now (monotonic nanoseconds).
func (b *Budget) Request(now int64) { b.ring.Add(now, cRequests, 1) }

// TryRetry spends one retry at now and reports whether the budget allowed it.
func (b *Budget) TryRetry(now int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.ring.Sum(now)
	if float64(s[cRetries])+1 > b.ratio*float64(s[cRequests])+b.floor {
		return false
	}
	b.ring.Add(now, cRetries, 1)
	return true
}

// Refund gives back a retry TryRetry spent at (about) at that was not made
// after all, as when its caller went away during the back-off.
func (b *Budget) Refund(at int64) { b.ring.Add(at, cRetries, -1) }

// Ratio returns retries / requests over the window ending at now (0 without
// requests). The governor_sdk_retry_budget_ratio gauge reports it.
func (b *Budget) Ratio(now int64) float64 {
	s := b.ring.Sum(now)
	if s[cRequests] == 0 || s[cRetries] <= 0 {
		return 0 // a refund landing a bucket after its retry can leave -1
	}
	return float64(s[cRetries]) / float64(s[cRequests])
}
