package limiters

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// none admits everything: what a service without protection does.
type none struct{}

func newNone(Options) (Limiter, error) { return none{}, nil }

func (none) Acquire(context.Context, Request) (Ticket, error) { return Ticket{}, nil }
func (none) Release(Ticket, time.Duration, bool)              {}
func (none) Close()                                           {}

// static is a fixed concurrency limit.
type static struct {
	limit    int64
	inflight atomic.Int64
}

func newStatic(o Options) (Limiter, error) { return &static{limit: int64(o.StaticLimit)}, nil }

func (s *static) Acquire(context.Context, Request) (Ticket, error) {
	if s.inflight.Add(1) > s.limit {
		s.inflight.Add(-1)
		return Ticket{}, errStatic
	}
	return Ticket{}, nil
}

func (s *static) Release(Ticket, time.Duration, bool) { s.inflight.Add(-1) }
func (s *static) Close()                              {}

// xrate is a token bucket from golang.org/x/time/rate set to the calibrated
// capacity, with a burst of a tenth of a second of it.
type xrate struct{ l *rate.Limiter }

var (
	errXRate  = fmt.Errorf("%w: rate limit", ErrRejected)
	errStatic = fmt.Errorf("%w: static concurrency limit", ErrRejected)
)

func newXRate(o Options) (Limiter, error) {
	r := o.CapacityRPS
	if r <= 0 {
		r = 1000
	}
	return &xrate{l: rate.NewLimiter(rate.Limit(r), max(1, int(r/10)))}, nil
}

func (x *xrate) Acquire(context.Context, Request) (Ticket, error) {
	if !x.l.Allow() {
		return Ticket{}, errXRate
	}
	return Ticket{}, nil
}

func (x *xrate) Release(Ticket, time.Duration, bool) {}
func (x *xrate) Close()                              {}
