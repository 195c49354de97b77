package governor

import (
	"time"

	"governor.dev/governor/sdk/rules"
)

// Outcome is how an admitted request ended.
type Outcome uint8

// Outcomes.
const (
	// Success: the request was served (HTTP status below 500).
	Success Outcome = iota
	// Failure: the request failed (HTTP 5xx); counted as an error.
	Failure
	// Dropped: the request failed from overload (a timeout, a refused
	// downstream); counted as an error and a congestion signal to the
	// limiter.
	Dropped
)

// Permit is an admitted request's slot. It is a small value: admission
// allocates nothing. The zero Permit (ungoverned, exempt or refused request)
// releases nothing.
type Permit struct {
	rt       *route
	start    int64
	inflight int32
	shard    uint16
	class    uint8
}

// Release returns the slot and records the request's latency and outcome
// (for metrics and for the adaptive limit). Call it exactly once per
// admitted request, with the latency measured by the caller.
func (p Permit) Release(latency time.Duration, o Outcome) { p.release(latency, o, true) }

// ReleaseUnmeasured returns the slot and counts the outcome as Release does,
// but records no latency: neither in the request duration histogram nor as a
// sample for the adaptive limit. Use it for work whose duration is not a
// service time: a stream held open for minutes, a long poll, a server-sent
// event feed. Released with Release, one such request would be taken as a
// latency of minutes, and the limit of every request sharing its route would
// fall. held is how long the request held its slot, measured as Release's
// latency; it only places the release in time. Call it (or Release) exactly
// once per admitted request.
func (p Permit) ReleaseUnmeasured(held time.Duration, o Outcome) { p.release(held, o, false) }

// release gives the slot back after latency, counts the outcome and, when
// measured, records the latency in the histogram and for the limiter.
func (p Permit) release(latency time.Duration, o Outcome, measured bool) {
	rt := p.rt
	if rt == nil {
		return
	}
	s := &rt.shards[p.shard]
	s.inflight.Add(-1)
	if measured {
		s.duration.observe(latency)
	}
	if o != Success {
		s.errors[p.class].Add(1)
	}
	if c := rt.conc; c != nil {
		end := p.start + int64(latency)
		if p.class == 0 {
			rt.reserve.Released(end)
		}
		switch g := c.gradient; {
		case !measured: // no sample for the limiter
		case g != nil:
			g.ObserveShard(uint32(p.shard), end, int64(latency), int(p.inflight), o == Dropped)
		default:
			c.observe(uint32(p.shard), end, int64(latency), int(p.inflight), o == Dropped)
		}
	}
	if q := rt.cell.queue; q.Len() > 0 {
		q.Dispatch()
	}
}

// Admitted reports whether the permit holds a governed slot (false for the
// zero Permit of an ungoverned or exempt request).
func (p Permit) Admitted() bool { return p.rt != nil }

// Route returns the name of the route that admitted the request ("" if none).
func (p Permit) Route() string {
	if p.rt == nil {
		return ""
	}
	return p.rt.name
}

// Class returns the traffic class the request was admitted as ("" for the
// zero Permit).
func (p Permit) Class() rules.Class {
	if p.rt == nil {
		return ""
	}
	return rules.Classes[p.class]
}
