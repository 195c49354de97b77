package limiters

import (
	"context"
	"fmt"
	"slices"
	"time"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/limit"
	"governor.dev/governor/sdk/rules"
)

// gov is Governor's admission core (package governor of the SDK) with its
// default ruleset: one catch-all route with an adaptive concurrency limit of
// the given algorithm and priority shedding; "governor-queue" adds the CoDel
// queue the default ruleset leaves out. With deadlines, the request's stated
// deadline goes to Admit (refused at once when it has passed or leaves less
// than the recent latency); "governor-nodeadline" leaves it out.
// "governor-nosched" is "governor" with the overload throttle
// (governor.OverloadOptions: shedding the lowest classes while Go's
// scheduling latency is high) turned off.
type gov struct {
	g         *governor.Governor
	deadlines bool
	// route is the route the laboratory's requests (GET /) take, whose
	// limit Limit and LimitState report.
	route string
}

// classNames are the priority values Admit receives per class rank.
var classNames = [...]string{"critical", "core", "browse", "batch"}

func newGovernor(algorithm string, queue, deadlines, sched bool) factory {
	return func(o Options) (Limiter, error) {
		rs := o.Ruleset
		if rs == nil {
			rs = governor.DefaultRuleset("bench")
			rs.Routes[0].Concurrency.Algorithm = algorithm
			if queue {
				rs.Routes[0].Queue = &rules.Queue{} // CoDel with its defaults
			}
		}
		route, err := CheckRuleset(rs)
		if err != nil {
			return nil, err
		}
		a := &gov{deadlines: deadlines, route: route}
		opts := governor.DefaultOptions(rs.Service)
		opts.Defaults = rs
		opts.Overload.Disabled = !sched
		g, err := governor.New(opts)
		if err != nil {
			return nil, fmt.Errorf("limiters: governor: %w", err)
		}
		a.g = g
		return a, nil
	}
}

func (a *gov) Acquire(ctx context.Context, r Request) (Ticket, error) {
	prio := "core"
	if k := r.Class.Rank(); k >= 0 {
		prio = classNames[k]
	}
	req := governor.Request{Path: "/", Method: "GET", Priority: prio}
	if a.deadlines {
		req.Deadline = r.Deadline
	}
	p, err := a.g.Admit(ctx, req)
	if err != nil {
		return Ticket{}, fmt.Errorf("%w: %w", ErrRejected, err)
	}
	return Ticket{permit: p}, nil
}

func (a *gov) Release(t Ticket, latency time.Duration, failed bool) {
	o := governor.Success
	if failed {
		o = governor.Dropped
	}
	t.permit.Release(latency, o)
}

func (a *gov) Close() { a.g.Close() }

// Overload is the overload throttle's level (classes shed) and the mean
// scheduling latency of its last window.
func (a *gov) Overload() (float64, time.Duration) { return a.g.OverloadLevel() }

// Limit is the current concurrency limit of the route the requests take.
func (a *gov) Limit() int {
	l, _ := a.g.Limit(a.route)
	return l
}

// LimitState is the route limiter's state after its last decided window
// (limit.Snapshot: the no-load RTT estimate, the last window's average RTT,
// the learned limit, whether a probe runs); false before it is built or
// when the algorithm has none.
func (a *gov) LimitState() (limit.Snapshot, bool) {
	return a.g.LimiterState(a.route)
}

// CheckRuleset returns the name of the route of rs that the laboratory's
// requests (GET /) take, as the SDK matches them (the longest path prefix,
// which for "/" is "/"; a route listing GET before one listing no method),
// or an error naming routes if no route takes them or the one that does
// has no concurrency limit: a run with such a ruleset would measure no
// limiter at all.
func CheckRuleset(rs *rules.Ruleset) (string, error) {
	var found *rules.Route
	for i := range rs.Routes {
		r := &rs.Routes[i]
		if r.Match.PathPrefix != "/" || (len(r.Match.Methods) > 0 && !slices.Contains(r.Match.Methods, "GET")) {
			continue
		}
		if found == nil || (len(found.Match.Methods) == 0 && len(r.Match.Methods) > 0) {
			found = r
		}
	}
	switch {
	case found == nil:
		return "", fmt.Errorf("limiters: ruleset: routes: no route matches GET /, the only request the laboratory sends (a path_prefix of \"/\" is needed)")
	case found.Concurrency == nil:
		return "", fmt.Errorf("limiters: ruleset: routes: route %q, which GET / takes, has no concurrency limit", found.Name)
	}
	return found.Name, nil
}
