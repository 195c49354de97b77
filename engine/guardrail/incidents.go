package guardrail

import (
	"math"
	"reflect"
	"time"

	"governor.dev/governor/sdk/rules"
)

// Incident is trouble on a service that its rule version does not control,
// seen at one evaluation: the breaker to a dependency open, say. While an
// incident overlaps a guarded version's windows, the error ratio and p99
// latency comparisons are confounded (see the package documentation).
type Incident struct {
	Service string `json:"service"`
	// Kind groups sightings into one incident with Service and Downstream
	// (e.g. "breaker_open").
	Kind string `json:"kind"`
	// Downstream names the dependency in trouble, if any. A version that
	// changes this downstream's rules may be what caused it, so it is no
	// confounder for that version.
	Downstream string `json:"downstream,omitempty"`
	// What says it for people, e.g. "the breaker to payments is open on 2
	// instance(s)".
	What string `json:"what"`
}

func (i Incident) key() string { return i.Kind + "\x00" + i.Downstream }

// Noted is one incident as the guardrail keeps it: seen at consecutive
// notes from From to To.
type Noted struct {
	Incident
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// maxSpans bounds the incidents kept per service.
const maxSpans = 64

// Note records the incidents open at time at; the evaluator calls it once
// per cycle with everything it sees open (nil: nothing). An incident seen
// at consecutive notes is one incident lasting from the first to the last;
// one missing from a note has ended. Incidents older than any window a
// watch can still compare are forgotten. Notes live in memory only: after a
// leader change the new leader knows the incidents from its first cycle on.
func (g *Guard) Note(at time.Time, open []Incident) {
	g.mu.Lock()
	defer g.mu.Unlock()
	prev := g.noted
	// As far back as a window still compared reaches: further for a watch
	// judged against the window before unjudged versions (see chain).
	horizon := g.horizon(at)
	for _, in := range open {
		spans := g.spans[in.Service]
		extended := false
		for i := len(spans) - 1; i >= 0; i-- {
			s := &spans[i]
			if s.key() == in.key() && !prev.IsZero() && s.To.Equal(prev) {
				s.To, s.What = at, in.What
				extended = true
				break
			}
		}
		if !extended {
			spans = append(spans, Noted{Incident: in, From: at, To: at})
		}
		g.spans[in.Service] = spans
	}
	for svc, spans := range g.spans {
		keep := spans[:0]
		for _, s := range spans {
			if !s.To.Before(horizon) {
				keep = append(keep, s)
			}
		}
		if len(keep) > maxSpans {
			keep = append(keep[:0:0], keep[len(keep)-maxSpans:]...)
		}
		if len(keep) == 0 {
			delete(g.spans, svc)
			continue
		}
		g.spans[svc] = keep
	}
	g.noted = at
}

// Incidents returns the incidents kept for a service, oldest first.
func (g *Guard) Incidents(service string) []Noted {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Noted(nil), g.spans[service]...)
}

// incidentsIn returns the service's incidents overlapping [from, to].
func (g *Guard) incidentsIn(service string, from, to time.Time) []Noted {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []Noted
	for _, s := range g.spans[service] {
		if !s.From.After(to) && !s.To.Before(from) {
			out = append(out, s)
		}
	}
	return out
}

// changedDownstreams names the downstreams whose rules differ between two
// rulesets (present in one only, or configured differently).
func changedDownstreams(a, b *rules.Ruleset) map[string]bool {
	byName := func(rs *rules.Ruleset) map[string]rules.Downstream {
		m := map[string]rules.Downstream{}
		if rs != nil {
			for _, d := range rs.Downstreams {
				m[d.Name] = d
			}
		}
		return m
	}
	am, bm := byName(a), byName(b)
	out := map[string]bool{}
	for n, d := range am {
		if o, ok := bm[n]; !ok || !reflect.DeepEqual(d, o) {
			out[n] = true
		}
	}
	for n := range bm {
		if _, ok := am[n]; !ok {
			out[n] = true
		}
	}
	return out
}

// admitsMore reports whether v lets more traffic through than parent on a
// route both have: a higher rate limit or concurrency maximum, or one
// removed. Such a version sends more to its dependencies and may be what
// troubles them.
func admitsMore(v, parent *rules.Ruleset) bool {
	if v == nil || parent == nil {
		return false
	}
	rate := func(l *rules.RateLimit) float64 {
		if l == nil {
			return math.Inf(1)
		}
		return l.Rate
	}
	conc := func(c *rules.Concurrency) float64 {
		switch {
		case c == nil:
			return math.Inf(1)
		case c.Max == 0:
			return 1000 // the SDK's default maximum
		}
		return float64(c.Max)
	}
	prev := make(map[string]rules.Route, len(parent.Routes))
	for _, r := range parent.Routes {
		prev[r.Name] = r
	}
	for _, r := range v.Routes {
		if p, ok := prev[r.Name]; ok && (rate(r.RateLimit) > rate(p.RateLimit) || conc(r.Concurrency) > conc(p.Concurrency)) {
			return true
		}
	}
	return false
}
