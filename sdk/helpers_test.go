package governor_test

import (
	"sync/atomic"
	"testing"
	"time"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/limit"
	"governor.dev/governor/sdk/rules"
)

// fixedLimiter is a limiter whose limit the test sets; it records samples.
type fixedLimiter struct {
	limit   atomic.Int64
	samples atomic.Int64
	dropped atomic.Int64
	rtt     atomic.Int64 // the SampleRTT its Snapshot reports, ns
}

func (f *fixedLimiter) Limit() int { return int(f.limit.Load()) }

func (f *fixedLimiter) Snapshot() limit.Snapshot {
	return limit.Snapshot{Limit: f.Limit(), SampleRTT: time.Duration(f.rtt.Load())}
}

func (f *fixedLimiter) Observe(now, rtt int64, inflight int, dropped bool) {
	f.samples.Add(1)
	if dropped {
		f.dropped.Add(1)
	}
}

// limiters hands out fixed limiters (Max of the rules, else Initial, else 20)
// and remembers them by creation order.
type limiters struct{ made []*fixedLimiter }

func (l *limiters) factory(cfg rules.Concurrency, _ clock.Clock) (governor.Limiter, error) {
	f := &fixedLimiter{}
	n := cfg.Max
	if n == 0 {
		n = cfg.Initial
	}
	if n == 0 {
		n = 20
	}
	f.limit.Store(int64(n))
	l.made = append(l.made, f)
	return f, nil
}

// fakeStart is far in the future of real time, so contexts with deadlines in
// virtual time are not already expired in real time.
var fakeStart = time.Now().Add(24 * time.Hour).Truncate(time.Hour)

type fixture struct {
	g    *governor.Governor
	clk  *clock.Fake
	lims *limiters
}

// newFixture returns a governor on a fake clock with fixed limiters and the
// given number of shards, enforcing rs as version 1.
func newFixture(t testing.TB, shards int, rs *rules.Ruleset) *fixture {
	t.Helper()
	f := &fixture{clk: clock.NewFake(fakeStart), lims: &limiters{}}
	opts := governor.DefaultOptions(rs.Service)
	opts.Clock = f.clk
	opts.Shards = shards
	opts.NewLimiter = f.lims.factory
	opts.Defaults = &rules.Ruleset{Service: rs.Service}
	g, err := governor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	if err := g.Apply(rs, 1); err != nil {
		t.Fatal(err)
	}
	f.g = g
	return f
}

func route(name, prefix string) rules.Route {
	return rules.Route{Name: name, Match: rules.Match{PathPrefix: prefix}}
}

func ruleset(routes ...rules.Route) *rules.Ruleset {
	return &rules.Ruleset{Service: "svc", Routes: routes}
}
