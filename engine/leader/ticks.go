package leader

import (
	"context"
	"time"

	"governor.dev/governor/sdk/clock"
)

// RunTicks calls fn once per interval-aligned tick that this replica leads
// and claims, until ctx ends. Ticks are the wall-clock times truncated to the
// interval, so every replica names a tick the same way; a claim lost to
// another replica, or a tick met while not leading, is skipped. The claim
// and fn run under the elector's LeaderContext: when the lead is lost
// mid-tick, fn's context ends and what is left of the tick is not done.
func RunTicks(ctx context.Context, e Elector, clk clock.Clock, interval time.Duration, fn func(ctx context.Context, tick time.Time)) {
	if clk == nil {
		clk = clock.Real{}
	}
	var last time.Time
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
		if ok, err := e.ClaimTick(lctx, tick); err == nil && ok {
			fn(lctx, tick)
		}
		cancel()
	}
}
