package guardrail

import (
	"context"
	"fmt"
	"strings"
	"time"

	"governor.dev/governor/engine/signals"
)

// Metric is an SLO signal the guardrail compares.
type Metric string

// The metrics the guardrail reads.
const (
	// ErrorRatio is errors per admitted request.
	ErrorRatio Metric = "error_ratio"
	// LatencyP99 is the p99 of admitted-request latency in seconds.
	LatencyP99 Metric = "latency_p99"
	// GoodputShare is the share of offered requests served without error:
	// (1 - shed ratio) x (1 - error ratio), and 0 where every request is
	// shed (the error ratio of nothing admitted is 0/0). Relative to the
	// offered load, so a change of traffic alone does not move it.
	GoodputShare Metric = "goodput_share"
	// AdmittedShare is the share of offered requests admitted (1 - shed
	// ratio): the part of the goodput a rule version decides. It replaces
	// GoodputShare while an incident the version does not control may
	// cause errors.
	AdmittedShare Metric = "admitted_share"
	// OfferedLoad is the inbound request rate, every outcome counted. It is
	// not judged: it tells whether the two windows are comparable.
	OfferedLoad Metric = "offered_load"
	// ShedRatio is the share of offered requests refused. It is not judged:
	// batched reads (BatchSeries) derive the goodput and admitted shares
	// from it and the error ratio, step by step, as their queries do.
	ShedRatio Metric = "shed_ratio"
)

// Metrics lists the judged metrics in order.
var Metrics = []Metric{ErrorRatio, LatencyP99, GoodputShare}

// Series gives the samples of a service's metric every step over [from, to].
// An answer that may lack data (a store of a federated setup unavailable,
// see signals.PartialData) is returned as a *PartialError, never as
// samples: the Guard then holds the watches the read covers rather than
// judge them on windows that may miss the series that matter.
type Series interface {
	Samples(ctx context.Context, service string, m Metric, from, to time.Time, step time.Duration) ([]float64, error)
}

// BatchSeries is a Series that can also read one metric of many services
// over the same window in one query, with the time of every sample. With
// it the Guard assembles its windows from samples on a grid of Step shared
// by all services (see Record and the package documentation) and reads the
// points it lacks in batches: OfferedLoad, ErrorRatio, LatencyP99 and
// ShedRatio, deriving GoodputShare and AdmittedShare from the last three.
// ok false means the answer is not one series per service labelled only by
// service (a custom template, say): the Guard then reads each service
// alone.
type BatchSeries interface {
	Series
	SamplesBy(ctx context.Context, services []string, m Metric, from, to time.Time, step time.Duration) (samples map[string][]signals.Point, ok bool, err error)
}

var _ BatchSeries = SignalSeries{}

// PartialError is the answer of a read that warned that data may be
// missing (signals.PartialData). Warnings that are not about missing data
// (infos, PromQL annotations) are no PartialError. The Guard judges no
// watch the read covers and rolls none back: each stays Inconclusive, its
// reason the error's text, until its reads are whole again (see the
// package documentation).
type PartialError struct {
	// Read names what was read: "checkout error_ratio from <t> to <t>",
	// or, batched, "error_ratio of cart, checkout from <t> to <t>".
	Read string
	// Warning is the store's first warning that data may be missing.
	Warning string
}

// Error is "metrics partial: <read>: <warning>", as the engine words the
// partial reads of its cycle.
func (e *PartialError) Error() string { return "metrics partial: " + e.Read + ": " + e.Warning }

// partial returns the PartialError of a result whose warnings say data may
// be missing, or nil.
func partial(res *signals.Result, read func() string) error {
	for _, w := range res.Warnings {
		if signals.PartialData(w) {
			return &PartialError{Read: read(), Warning: w}
		}
	}
	return nil
}

// maxNamedServices bounds the services a batched read's description names.
const maxNamedServices = 3

// SignalSeries reads the samples from a signals.Source with the Reader's
// templates, so the guardrail sees what the load score sees.
type SignalSeries struct {
	Source signals.Source
	Reader *signals.Reader
}

// Samples implements Series.
func (s SignalSeries) Samples(ctx context.Context, service string, m Metric, from, to time.Time, step time.Duration) ([]float64, error) {
	q, err := s.query(m, service)
	if err != nil {
		return nil, err
	}
	res, err := s.Source.QueryRange(ctx, q, signals.Range{Start: from, End: to, Step: step})
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s: %w", ErrSeries, service, m, err)
	}
	if err := partial(res, func() string { return fmt.Sprintf("%s %s from %s to %s", service, m, stamp(from), stamp(to)) }); err != nil {
		return nil, err
	}
	var out []float64
	for _, sr := range res.Series {
		if sr.Labels["service"] != service && len(res.Series) > 1 {
			continue
		}
		for _, p := range sr.Points {
			out = append(out, p.V)
		}
	}
	return out, nil
}

// SamplesBy implements BatchSeries: the services' queries in one, split by
// the service label. A service without data has no entry. An answer that
// may lack data is a *PartialError for all the services: the warning does
// not say whose series are missing.
func (s SignalSeries) SamplesBy(ctx context.Context, services []string, m Metric, from, to time.Time, step time.Duration) (map[string][]signals.Point, bool, error) {
	q, err := s.query(m, services...)
	if err != nil {
		return nil, false, err
	}
	res, err := s.Source.QueryRange(ctx, q, signals.Range{Start: from, End: to, Step: step})
	if err != nil {
		return nil, false, fmt.Errorf("%w: %d services %s: %w", ErrSeries, len(services), m, err)
	}
	if err := partial(res, func() string {
		who := strings.Join(services, ", ")
		if len(services) > maxNamedServices {
			who = fmt.Sprintf("%d services", len(services))
		}
		return fmt.Sprintf("%s of %s from %s to %s", m, who, stamp(from), stamp(to))
	}); err != nil {
		return nil, true, err
	}
	out := make(map[string][]signals.Point, len(services))
	for _, sr := range res.Series {
		svc, ok := sr.Labels["service"]
		if !ok || len(sr.Labels) != 1 {
			return nil, false, nil
		}
		out[svc] = sr.Points
	}
	return out, true, nil
}

func (s SignalSeries) query(m Metric, services ...string) (string, error) {
	q := func(sig signals.Signal) (string, error) { return s.Reader.Query(sig, signals.PerService, services...) }
	switch m {
	case ErrorRatio:
		return q(signals.ErrorRatio)
	case LatencyP99:
		return q(signals.LatencyP99)
	case OfferedLoad:
		return q(signals.RequestRate)
	case ShedRatio:
		return q(signals.ShedRatio)
	case AdmittedShare:
		sr, err := q(signals.ShedRatio)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("1 - (%s)", sr), nil
	case GoodputShare:
		sr, err := q(signals.ShedRatio)
		if err != nil {
			return "", err
		}
		er, err := q(signals.ErrorRatio)
		if err != nil {
			return "", err
		}
		// A step that sheds everything serves nothing: its goodput is 1 -
		// shed ratio (0), although its error ratio is 0/0 (NaN or absent).
		return fmt.Sprintf("(1 - (%s)) * (((1 - (%s)) > -Inf) or (((%s) >= %v) * 0 + 1))", sr, er, sr, allShed), nil
	}
	return "", fmt.Errorf("%w: unknown metric %q", ErrSeries, m)
}
