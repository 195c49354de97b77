package signals

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/util/kahansum"
)

// The derivations below compute in Go exactly what the default templates
// compute in PromQL, from the shared queries' finer-grained sums: a group
// exists only when a series answered for it, ratios fall back to a zero
// numerator ("or 0 * denominator") and divide as PromQL does (0/0 is NaN, so
// unknown), sums use PromQL's Kahan summation and quantiles its
// BucketQuantile.

// group is one answer key of a shared query: the scope's labels, "" when
// absent (PromQL treats an empty label as absent).
type group struct{ service, instance string }

func groupOf(l Labels, scope Scope) group {
	g := group{service: l["service"]}
	if scope == PerInstance {
		g.instance = l["instance"]
	}
	return g
}

// labels renders g (and a class, when not empty) as sample labels.
func (g group) labels(class string) Labels {
	l := make(Labels, 3)
	if g.service != "" {
		l["service"] = g.service
	}
	if g.instance != "" {
		l["instance"] = g.instance
	}
	if class != "" {
		l["class"] = class
	}
	return l
}

// sum is a Kahan sum that knows whether anything was added.
type sum struct {
	v, c float64
	ok   bool
}

func (s *sum) add(f float64) {
	s.v, s.c = kahansum.Inc(f, s.v, s.c)
	s.ok = true
}

func (s sum) value() float64 { return s.v + s.c }

// ratio is PromQL's (num or 0 * den) / den over present sums.
func ratio(num, den sum) float64 {
	if num.ok {
		return num.value() / den.value()
	}
	return 0 * den.value() / den.value()
}

// refused reports whether the shed ratio counts outcome: one of
// ShedOutcomes.
func refused(outcome string) bool {
	switch outcome {
	case "shed", "rate_limited", "queue_timeout", "deadline", "overload":
		return true
	}
	return false
}

type classSums struct{ all, shed sum }

type requestSums struct {
	all, admitted, shed sum
	classes             map[string]*classSums
	classOrder          []string
}

// shadow reports whether outcome is one of ShadowOutcomes: not an offered
// request of its own.
func shadow(outcome string) bool { return strings.HasPrefix(outcome, "shadow_") }

// requestTotals folds the shared requests answer into sums per group,
// leaving out the shadow outcomes as the templates' offered matcher does.
func requestTotals(res *Result, scope Scope) (map[group]*requestSums, []group) {
	by := map[group]*requestSums{}
	var order []group
	for _, smp := range res.Samples {
		if shadow(smp.Labels["outcome"]) {
			continue
		}
		g := groupOf(smp.Labels, scope)
		rs, ok := by[g]
		if !ok {
			rs = &requestSums{classes: map[string]*classSums{}}
			by[g] = rs
			order = append(order, g)
		}
		class, outcome, v := smp.Labels["class"], smp.Labels["outcome"], smp.V
		cs, ok := rs.classes[class]
		if !ok {
			cs = &classSums{}
			rs.classes[class] = cs
			rs.classOrder = append(rs.classOrder, class)
		}
		rs.all.add(v)
		cs.all.add(v)
		if outcome == "admitted" {
			rs.admitted.add(v)
		}
		if refused(outcome) {
			rs.shed.add(v)
			cs.shed.add(v)
		}
	}
	return by, order
}

// derive computes the answers of the derived signals from the shared
// queries' answers. A signal whose shared query failed fails with it.
func derive(sigs []Signal, got [numShared]sharedAnswer, scope Scope) []answer {
	out := make([]answer, 0, len(sigs))
	var (
		reqs      map[group]*requestSums
		reqOrder  []group
		warned    [numShared]bool
		latencies *latencySums
		queue     *latencySums
	)
	if a := got[sharedRequests]; a.err == nil && a.res != nil && a.res.Type == TypeVector {
		reqs, reqOrder = requestTotals(a.res, scope)
	}
	if a := got[sharedLatency]; a.err == nil && a.res != nil && a.res.Type == TypeVector {
		latencies = latencyBuckets(a.res, scope)
	}
	if a := got[sharedQueue]; a.err == nil && a.res != nil && a.res.Type == TypeVector {
		queue = latencyBuckets(a.res, scope)
	}
	for _, s := range sigs {
		a := answer{sig: s}
		for _, q := range sharedNeeds[s] {
			g := got[q]
			switch {
			case a.err != nil || (a.res != nil && a.res.Type != TypeVector):
			case g.err != nil:
				a.err = g.err
			case g.res.Type != TypeVector:
				a.res = &Result{Type: g.res.Type}
			}
		}
		if a.err != nil || a.res != nil {
			out = append(out, a)
			continue
		}
		a.res = &Result{Type: TypeVector}
		for _, q := range sharedNeeds[s] {
			if a.partial == "" {
				a.partial = firstPartial(got[q].res.Warnings)
			}
			if !warned[q] {
				warned[q] = true
				a.res.Warnings = append(a.res.Warnings, got[q].res.Warnings...)
				switch q {
				case sharedLatency:
					a.res.Warnings = append(a.res.Warnings, latencies.warnings...)
				case sharedQueue:
					a.res.Warnings = append(a.res.Warnings, queue.warnings...)
				}
			}
		}
		at := func(smps []Sample) Point {
			if len(smps) > 0 {
				return Point{T: smps[0].T}
			}
			return Point{}
		}
		switch s {
		case RequestRate, ShedRatio, ShedRatioByClass:
			p := at(got[sharedRequests].res.Samples)
			a.res.Samples = requestSamples(s, reqs, reqOrder, p)
		case ErrorRatio:
			p := at(got[sharedRequests].res.Samples)
			a.res.Samples = errorSamples(reqs, reqOrder, got[sharedErrors].res, scope, p)
		case LatencyP50, LatencyP99:
			q := 0.5
			if s == LatencyP99 {
				q = 0.99
			}
			var forced string
			a.res.Samples, forced = latencies.quantile(q, at(got[sharedLatency].res.Samples))
			if forced != "" {
				a.res.Warnings = append(a.res.Warnings, forced)
			}
		case QueueDelayP99:
			var forced string
			a.res.Samples, forced = queue.quantile(0.99, at(got[sharedQueue].res.Samples))
			if forced != "" {
				a.res.Warnings = append(a.res.Warnings, forced)
			}
		case CPU, Memory:
			a.res.Samples = processSamples(s, got[sharedProcess].res.Samples)
		}
		out = append(out, a)
	}
	return out
}

func requestSamples(s Signal, reqs map[group]*requestSums, order []group, p Point) []Sample {
	out := make([]Sample, 0, len(order))
	for _, g := range order {
		rs := reqs[g]
		switch s {
		case RequestRate:
			out = append(out, Sample{Labels: g.labels(""), Point: Point{T: p.T, V: rs.all.value()}})
		case ShedRatio:
			out = append(out, Sample{Labels: g.labels(""), Point: Point{T: p.T, V: ratio(rs.shed, rs.all)}})
		case ShedRatioByClass:
			for _, c := range rs.classOrder {
				cs := rs.classes[c]
				out = append(out, Sample{Labels: g.labels(c), Point: Point{T: p.T, V: ratio(cs.shed, cs.all)}})
			}
		}
	}
	return out
}

func errorSamples(reqs map[group]*requestSums, order []group, errs *Result, scope Scope, p Point) []Sample {
	num := make(map[group]sum, len(errs.Samples))
	for _, smp := range errs.Samples {
		g := groupOf(smp.Labels, scope)
		if _, dup := num[g]; !dup {
			num[g] = sum{v: smp.V, ok: true}
		}
	}
	out := make([]Sample, 0, len(order))
	for _, g := range order {
		den := reqs[g].admitted
		if !den.ok {
			continue
		}
		out = append(out, Sample{Labels: g.labels(""), Point: Point{T: p.T, V: ratio(num[g], den)}})
	}
	return out
}

// latencySums holds the classic-histogram buckets per group.
type latencySums struct {
	by       map[group]promql.Buckets
	order    []group
	warnings []string
}

func latencyBuckets(res *Result, scope Scope) *latencySums {
	l := &latencySums{by: map[group]promql.Buckets{}}
	bad := 0
	for _, smp := range res.Samples {
		le, err := strconv.ParseFloat(smp.Labels["le"], 64)
		if err != nil || math.IsNaN(le) {
			bad++
			continue
		}
		g := groupOf(smp.Labels, scope)
		b, ok := l.by[g]
		if !ok {
			l.order = append(l.order, g)
		}
		l.by[g] = append(b, promql.Bucket{UpperBound: le, Count: smp.V})
	}
	if bad > 0 {
		l.warnings = append(l.warnings, fmt.Sprintf(InfoPrefix+"%d bucket samples without a valid le label ignored", bad))
	}
	return l
}

// quantile is histogram_quantile(q, ...) over every group, with a warning
// when buckets had to be made monotonic.
func (l *latencySums) quantile(q float64, p Point) ([]Sample, string) {
	out := make([]Sample, 0, len(l.order))
	forced := 0
	var scratch promql.Buckets
	for _, g := range l.order {
		// BucketQuantile sorts and may adjust the buckets: work on a copy so
		// the other quantile sees the query's values.
		scratch = append(scratch[:0], l.by[g]...)
		v, monotonic, _, _, _, _ := promql.BucketQuantile(q, scratch)
		if monotonic {
			forced++
		}
		out = append(out, Sample{Labels: g.labels(""), Point: Point{T: p.T, V: v}})
	}
	if forced > 0 {
		return out, fmt.Sprintf(InfoPrefix+"input to histogram_quantile needed to be fixed for monotonicity in %d groups", forced)
	}
	return out, ""
}

// processSamples picks the samples of s (CPU or memory) from the shared
// process query, without the label telling them apart.
func processSamples(s Signal, all []Sample) []Sample {
	out := make([]Sample, 0, len(all)/2)
	for _, smp := range all {
		if smp.Labels["governor_signal"] != string(s) {
			continue
		}
		l := make(Labels, len(smp.Labels)-1)
		for k, v := range smp.Labels {
			if k != "governor_signal" {
				l[k] = v
			}
		}
		out = append(out, Sample{Labels: l, Point: smp.Point})
	}
	return out
}
