package limiters

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/priority"
	"github.com/go-kratos/aegis/ratelimit"
	"github.com/go-kratos/aegis/ratelimit/bbr"
	"github.com/zeromicro/go-zero/core/load"
	"github.com/zeromicro/go-zero/core/logx"

	"governor.dev/governor/sdk/rules"
)

// aegisBBR is github.com/go-kratos/aegis ratelimit/bbr with its defaults
// (10 s window in 100 buckets, CPU threshold 80%). It measures latency
// itself, from Allow to the done callback.
type aegisBBR struct{ l *bbr.BBR }

var errAegis = fmt.Errorf("%w: aegis bbr", ErrRejected)

func newAegisBBR(Options) (Limiter, error) { return &aegisBBR{l: bbr.NewLimiter()}, nil }

func (a *aegisBBR) Acquire(context.Context, Request) (Ticket, error) {
	done, err := a.l.Allow()
	if err != nil {
		return Ticket{}, errAegis
	}
	return Ticket{ref: done}, nil
}

func (a *aegisBBR) Release(t Ticket, _ time.Duration, failed bool) {
	var info ratelimit.DoneInfo
	if failed {
		info.Err = errFailed
	}
	t.ref.(ratelimit.DoneFunc)(info)
}

func (a *aegisBBR) Close() {}

var errFailed = errors.New("limiters: request failed")

// failsafe is failsafe-go's adaptive limiter built with a prioritizer
// (its recommended setup for prioritised shedding; queueing 2x-3x the limit
// by default), with the classes mapped onto its priorities. It measures
// latency itself, from permit to Record.
type failsafe struct {
	l      adaptivelimiter.PriorityLimiter[any]
	cancel context.CancelFunc
}

func newFailsafe(Options) (Limiter, error) {
	p := adaptivelimiter.NewPrioritizer()
	cancel := p.ScheduleCalibrations(context.Background(), time.Second)
	return &failsafe{l: adaptivelimiter.NewBuilder[any]().BuildPrioritized(p), cancel: cancel}, nil
}

var classPriority = map[rules.Class]priority.Priority{
	rules.ClassCritical: priority.VeryHigh,
	rules.ClassCore:     priority.High,
	rules.ClassBrowse:   priority.Medium,
	rules.ClassBatch:    priority.Low,
}

func (f *failsafe) Acquire(ctx context.Context, r Request) (Ticket, error) {
	p, ok := classPriority[r.Class]
	if !ok {
		p = priority.High
	}
	permit, err := f.l.AcquirePermitWithPriority(ctx, p)
	if err != nil {
		if errors.Is(err, adaptivelimiter.ErrExceeded) {
			return Ticket{}, fmt.Errorf("%w: failsafe-go: %w", ErrRejected, err)
		}
		return Ticket{}, err
	}
	return Ticket{ref: permit}, nil
}

func (f *failsafe) Release(t Ticket, _ time.Duration, failed bool) {
	p := t.ref.(adaptivelimiter.Permit)
	if failed {
		// A timed-out execution must not feed its duration to the limiter
		// (failsafe-go's documented use of Drop).
		p.Drop()
		return
	}
	p.Record()
}

func (f *failsafe) Close() { f.cancel() }

// gozero is go-zero's core/load adaptive shedder with its defaults (5 s
// window in 50 buckets, CPU threshold 90%). It measures latency itself.
type gozero struct{ s load.Shedder }

var errGoZero = fmt.Errorf("%w: go-zero shedder", ErrRejected)

func newGoZero(Options) (Limiter, error) {
	Quiet()
	return &gozero{s: load.NewAdaptiveShedder()}, nil
}

func (g *gozero) Acquire(context.Context, Request) (Ticket, error) {
	p, err := g.s.Allow()
	if err != nil {
		return Ticket{}, errGoZero
	}
	return Ticket{ref: p}, nil
}

func (g *gozero) Release(t Ticket, _ time.Duration, failed bool) {
	p := t.ref.(load.Promise)
	if failed {
		p.Fail()
		return
	}
	p.Pass()
}

func (g *gozero) Close() {}

// Quiet turns off the logging go-zero does on its own: every drop at error
// level, and a CPU and memory line every minute from a goroutine its
// packages start when imported. Logging would distort the measurement and
// pollute the output of cmd/overload, so its main calls Quiet first.
func Quiet() {
	logx.Disable()
	load.DisableLog()
}
