package leader

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"governor.dev/governor/sdk/clock"
)

// TickOption configures RunTicks.
type TickOption func(*tickOptions)

type tickOptions struct {
	logger *slog.Logger
}

// WithLogger makes RunTicks log the claims that fail; a nil logger logs
// nothing, as does RunTicks without this option.
func WithLogger(l *slog.Logger) TickOption {
	return func(o *tickOptions) { o.logger = l }
}

// failure names a failed claim for RunTicks's log: its error, or for a
// clock skew (whose message names each tick and its skew) the sentinel, so
// that a skew that stays is logged as one failure.
func failure(err error) string {
	if errors.Is(err, ErrClockSkew) {
		return ErrClockSkew.Error()
	}
	return err.Error()
}

// overran logs a warning when the work of tick, started at start, ended at
// end after the next tick's time: the ticks that passed meanwhile are
// skipped, not run late.
func overran(log *slog.Logger, e Elector, end, start, tick time.Time, interval time.Duration) {
	skipped := int64(end.Truncate(interval).Sub(tick) / interval)
	if skipped < 1 {
		return
	}
	log.Warn("leader: tick outlasted its interval; the ticks that passed meanwhile are skipped",
		"identity", e.Identity(), "tick", tick, "took", end.Sub(start), "interval", interval, "skipped", skipped)
}

// RunTicks calls fn once per interval-aligned tick that this replica leads
// and claims, until ctx ends. Ticks are the wall-clock times truncated to the
// interval, so every replica names a tick the same way; a claim lost to
// another replica, or a tick met while not leading, is skipped. The claim
// and fn run under the elector's LeaderContext: when the lead is lost
// mid-tick, fn's context ends and what is left of the tick is not done.
// A tick whose fn outlasts the interval delays the next: the ticks that
// passed meanwhile are skipped, neither run late nor piled up, and with
// WithLogger a warning says how long the tick took and how many were
// skipped.
//
// A claim that fails (the database is read-only, the engine's role may not
// write governor_engine_ticks) skips its tick: the replica leads but
// evaluates nothing. With WithLogger, RunTicks logs a warning when claims
// start failing and whenever their error changes, then at debug level
// while they fail the same way (claims failing with ErrClockSkew fail the
// same way, whatever tick and skew they name).
//
// An elector of this package serves interval as TickIntervalMetric.
func RunTicks(ctx context.Context, e Elector, clk clock.Clock, interval time.Duration, fn func(ctx context.Context, tick time.Time), opts ...TickOption) {
	if clk == nil {
		clk = clock.Real{}
	}
	var o tickOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	if r, ok := e.(intervalReporter); ok {
		r.setTickInterval(interval)
	}
	var last time.Time
	failing := "" // the error of the last failed claim; "" after one that worked
	for {
		now := clk.Now()
		next := now.Truncate(interval).Add(interval)
		t := clk.NewTimer(next.Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		tick := clk.Now().Truncate(interval)
		if !tick.After(last) || !e.IsLeader() {
			continue
		}
		last = tick
		lctx, cancel := e.LeaderContext(ctx)
		ok, err := e.ClaimTick(lctx, tick)
		switch {
		case err == nil:
			failing = ""
			if ok {
				start := clk.Now()
				fn(lctx, tick)
				overran(o.logger, e, clk.Now(), start, tick, interval)
			}
		case ctx.Err() != nil:
		case errors.Is(err, ErrNotLeader):
			// The lead ended between IsLeader and the claim; the elector
			// says so itself.
			o.logger.Debug("leader: tick met without the lead", "identity", e.Identity(), "tick", tick, "err", err)
		case failure(err) != failing:
			failing = failure(err)
			o.logger.Warn("leader: cannot claim the tick; leading without evaluating until a claim succeeds",
				"identity", e.Identity(), "tick", tick, "interval", interval, "err", err)
		default:
			o.logger.Debug("leader: claim tick", "identity", e.Identity(), "tick", tick, "err", err)
		}
		cancel()
	}
}
