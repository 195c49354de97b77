package guardrail

import (
	"context"
	"errors"
	"math"
	"slices"
	"time"

	"governor.dev/governor/engine/signals"
)

// The samples of every service on one grid: the multiples of Step (as
// time.Truncate counts them, as the engine's ticks do). A cycle whose tick
// lies on the grid hands its signal snapshot to Record, which keeps the
// values as the samples of that grid point; the windows of every watch are
// then assembled from these points, and only the points no snapshot covered
// (before the engine started, a tick off the grid or missed, a read that
// failed or was partial) are read from the store, in batches of services
// sharing the same missing span.

// baseMetrics are the metrics a grid point holds; the shares are derived
// from them as their queries compute them.
var baseMetrics = [...]Metric{OfferedLoad, ErrorRatio, LatencyP99, ShedRatio}

// baseSignals are the snapshot signals of baseMetrics, in the same order.
var baseSignals = [...]signals.Signal{signals.RequestRate, signals.ErrorRatio, signals.LatencyP99, signals.ShedRatio}

// allShed is the shed ratio from which a step counts as refusing every
// request (a ratio of sums may miss 1 by a rounding error): its goodput
// share is 1 - shed ratio although its error ratio is unknown (0/0).
const allShed = 1 - 1e-9

// point is one service's samples at one grid point, by baseMetrics; NaN:
// no sample. A point present in a ring has been observed, with or without
// samples.
type point [len(baseMetrics)]float64

func emptyPoint() point {
	var p point
	for i := range p {
		p[i] = math.NaN()
	}
	return p
}

// value is metric m at the point, NaN when it has none.
func (p point) value(m Metric) float64 {
	switch m {
	case OfferedLoad:
		return p[0]
	case ErrorRatio:
		return p[1]
	case LatencyP99:
		return p[2]
	case ShedRatio:
		return p[3]
	case AdmittedShare:
		return 1 - p[3]
	case GoodputShare:
		er := p[1]
		if math.IsNaN(er) && p[3] >= allShed {
			// Nothing admitted: nothing served, and no error ratio (0/0).
			er = 0
		}
		return (1 - p[3]) * (1 - er)
	}
	return math.NaN()
}

// set stores the sample of base metric m.
func (p *point) set(m Metric, v float64) {
	if i := slices.Index(baseMetrics[:], m); i >= 0 {
		p[i] = v
	}
}

// ring holds one service's grid points by time (Unix nanoseconds).
type ring map[int64]point

// ringed reports whether the guard assembles its windows from grid points:
// it needs a BatchSeries, whose samples carry their times, to read the
// points no snapshot covered.
func (g *Guard) ringed() (BatchSeries, bool) {
	bs, ok := g.o.Series.(BatchSeries)
	return bs, ok
}

// gridFrom is the first grid point at or after t.
func (g *Guard) gridFrom(t time.Time) time.Time {
	f := t.Truncate(g.o.Step)
	if f.Before(t) {
		f = f.Add(g.o.Step)
	}
	return f
}

// horizon is the oldest time a watch can still compare at time now: the
// start of the window before the oldest activation still judged, or before
// the baseline of an open watch judged past unjudged versions (at most
// Settle + MaxWait older: see chain) or judged after the fact (up to
// Recover older); g.mu is held.
func (g *Guard) horizon(now time.Time) time.Time {
	h := now.Add(-(g.o.Window + g.o.Settle + g.o.MaxWait + g.o.Step))
	for _, w := range g.watches {
		if w.d.Final {
			continue
		}
		if t := g.baseline(w.d).Add(-(g.o.Window + g.o.Step)); t.Before(h) {
			h = t
		}
		if t := w.origin.Add(-(g.o.Window + g.o.Step)); !w.origin.IsZero() && t.Before(h) {
			h = t
		}
	}
	return h
}

// Record keeps the per-service signals of a snapshot taken on the grid (At
// a multiple of Step) as every service's samples at that time: the request
// rate, error ratio, p99 latency and shed ratio, which the guardrail's
// metrics are (or derive from). Watches then read from the store only what
// no snapshot covered. A snapshot off the grid, of another scope, or with a
// failed or partial read (signals.PartialData) of one of those signals or
// of the freshness is ignored (its points are read from the store when
// needed, and a partial answer then holds the watches: see PartialError):
// a partial read may lack a service's series, which kept as a point
// without samples would read as a service that stopped reporting, and
// would never be read again. A signal unknown for a service (no series, not
// finite, stale) is no sample, and a service the snapshot lacks has no
// samples at that time. The snapshot must come from the templates and the
// source Series reads (the evaluator's Reader for SignalSeries). Without a
// BatchSeries, Record does nothing.
func (g *Guard) Record(snap *signals.Snapshot) {
	if _, ok := g.ringed(); !ok || snap == nil || snap.Scope != signals.PerService {
		return
	}
	at := snap.At
	if !at.Truncate(g.o.Step).Equal(at) {
		return
	}
	// A failed freshness query makes the reader mark every service stale
	// (no value at all), a partial one may: either way the snapshot says
	// nothing about which services reported.
	for _, s := range append(baseSignals[:], signals.Freshness) {
		if _, partial := snap.Partial[s]; partial || snap.Errors[s] != nil {
			return
		}
	}
	key := at.UnixNano()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.rings == nil {
		g.rings = map[string]ring{}
	}
	for k, e := range snap.Entries {
		p := emptyPoint()
		for i, s := range baseSignals {
			if v, ok := e.Get(s).Get(); ok {
				p[i] = v
			}
		}
		r := g.rings[k.Service]
		if r == nil {
			r = ring{}
			g.rings[k.Service] = r
		}
		r[key] = p
	}
	if g.recorded == nil {
		g.recorded = map[int64]bool{}
	}
	g.recorded[key] = true // a service without an entry had no samples
	g.forget(at)
}

// forget drops the grid points older than any window a watch can still
// compare at time now, and the services without a sample left.
func (g *Guard) forget(now time.Time) {
	oldest := g.horizon(now).UnixNano()
	for t := range g.recorded {
		if t < oldest {
			delete(g.recorded, t)
		}
	}
	for svc, r := range g.rings {
		some := false // any sample left: a service gone for good is forgotten
		for t, p := range r {
			if t < oldest {
				delete(r, t)
				continue
			}
			some = some || p.any()
		}
		if !some {
			delete(g.rings, svc)
		}
	}
}

// any reports whether the point holds a sample.
func (p point) any() bool {
	for _, v := range p {
		if !math.IsNaN(v) {
			return true
		}
	}
	return false
}

// gridView is what the watches of one Observe read their samples from.
type gridView struct {
	g *Guard
	// failed: services whose missing points could not be read in a batch;
	// they are read service by service on their own grid.
	failed map[string]bool
	// partial: services whose missing points were read in a batch that
	// may lack data; their watches are held, the points not kept.
	partial map[string]*PartialError
}

// lookup returns the service's point at t.
func (v gridView) lookup(svc string, t time.Time) (point, bool) {
	return v.g.point(svc, t.UnixNano())
}

// point returns the service's point at grid time key (Unix nanoseconds): a
// kept one, or none at a recorded time the snapshot had no entry for it.
func (g *Guard) point(svc string, key int64) (point, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pointLocked(svc, key)
}

func (g *Guard) pointLocked(svc string, key int64) (point, bool) {
	if p, ok := g.rings[svc][key]; ok {
		return p, true
	}
	if g.recorded[key] {
		return emptyPoint(), true
	}
	return point{}, false
}

// samples are the samples of metric m of a service at the grid points in
// [from, to], in time order, leaving out the points without one.
func (v gridView) samples(svc string, m Metric, from, to time.Time) []float64 {
	var out []float64
	for t := v.g.gridFrom(from); !t.After(to); t = t.Add(v.g.o.Step) {
		p, ok := v.lookup(svc, t)
		if !ok {
			continue
		}
		if x := p.value(m); !math.IsNaN(x) {
			out = append(out, x)
		}
	}
	return out
}

// gridSpan is a run of consecutive grid points, from..to.
type gridSpan struct{ from, to time.Time }

// fill reads, in batches, the grid points the open watches' windows need
// that no snapshot or earlier read covered: each service's missing points
// in one span, the services sharing a span read together, one query per
// base metric for up to maxBatch services. The points read are kept, as
// the recorded ones are: a scrape landing later for an instant already read
// does not change its sample.
func (g *Guard) fill(ctx context.Context, now time.Time, open []watch, bs BatchSeries) gridView {
	view := gridView{g: g, failed: map[string]bool{}, partial: map[string]*PartialError{}}
	spans := map[gridSpan][]string{}
	var order []gridSpan
	g.mu.Lock()
	for _, w := range open {
		win := g.windows(w.judgeAt(now), w.d)
		if win.settling {
			continue
		}
		// One span from the first missing point to the last: a range
		// query costs mostly per series, not per step, so reading the
		// points between (kept ones, the settling time) again is cheaper
		// than a second query.
		var run *gridSpan
		ivs := [][2]time.Time{{win.bFrom, win.bTo}, {win.aFrom, win.aTo}}
		if !w.origin.IsZero() {
			// The window before the cumulative checks' baseline.
			ivs = append([][2]time.Time{{w.origin.Add(-g.o.Window), w.origin.Add(-time.Millisecond)}}, ivs...)
		}
		for _, iv := range ivs {
			for t := g.gridFrom(iv[0]); !t.After(iv[1]); t = t.Add(g.o.Step) {
				if _, ok := g.pointLocked(w.d.Service, t.UnixNano()); ok {
					continue
				}
				if run == nil {
					run = &gridSpan{from: t}
				}
				run.to = t
			}
		}
		if run != nil {
			if _, ok := spans[*run]; !ok {
				order = append(order, *run)
			}
			spans[*run] = append(spans[*run], w.d.Service)
		}
	}
	g.mu.Unlock()

	for _, sp := range order {
		svcs := slices.Compact(slices.Sorted(slices.Values(spans[sp])))
		for chunk := range slices.Chunk(svcs, maxBatch) {
			got := make(map[string]ring, len(chunk))
			for _, svc := range chunk {
				r := ring{}
				for t := sp.from; !t.After(sp.to); t = t.Add(g.o.Step) {
					r[t.UnixNano()] = emptyPoint()
				}
				got[svc] = r
			}
			ok := true
			var pe *PartialError
			for _, m := range baseMetrics {
				res, answered, err := bs.SamplesBy(ctx, chunk, m, sp.from, sp.to, g.o.Step)
				if errors.As(err, &pe) {
					// The read covers every service of the chunk, and the
					// warning does not say whose series are missing.
					break
				}
				if err != nil || !answered {
					if err != nil {
						g.o.Logger.Debug("guardrail: batched read failed, reading each service alone", "metric", m, "services", len(chunk), "err", err)
					}
					ok = false
					break
				}
				for svc, pts := range res {
					r, mine := got[svc]
					if !mine {
						continue
					}
					for _, pt := range pts {
						if p, on := r[pt.T.UnixNano()]; on {
							p.set(m, pt.V)
							r[pt.T.UnixNano()] = p
						}
					}
				}
			}
			if pe != nil {
				for _, svc := range chunk {
					view.partial[svc] = pe
				}
				continue
			}
			if !ok {
				for _, svc := range chunk {
					view.failed[svc] = true
				}
				continue
			}
			g.mu.Lock()
			if g.rings == nil {
				g.rings = map[string]ring{}
			}
			for svc, r := range got {
				for t, p := range r {
					if _, kept := g.pointLocked(svc, t); kept {
						continue // read again only as part of the span
					}
					if g.rings[svc] == nil {
						g.rings[svc] = ring{}
					}
					g.rings[svc][t] = p
				}
			}
			g.mu.Unlock()
		}
	}
	return view
}

// prune forgets, under the lock, what no window can reach at time now.
func (g *Guard) prune(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.forget(now)
}
