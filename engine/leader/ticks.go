package leader

import (
	"context"
	"time"

	"governor.dev/governor/sdk/clock"
)

// RunTicks calls fn once per interval-aligned tick that this replica leads
// and claims, until ctx ends. Ticks are the wall-clock times truncated to the
// interval, so every replica names a tick the same way; a claim lost to
// another replica, or a tick met while not leading, is skipped.
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
		if ok, err := e.ClaimTick(ctx, tick); err == nil && ok {
			fn(ctx, tick)
		}
	}
}
