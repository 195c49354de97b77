package guardrail

import (
	"context"
	"fmt"
	"time"

	"governor.dev/governor/engine/signals"
)

// Metric is an SLO signal the guardrail compares.
type Metric string

// The compared metrics.
const (
	ErrorRatio Metric = "error_ratio"
	LatencyP99 Metric = "latency_p99"
	Goodput    Metric = "goodput"
)

// Metrics lists the compared metrics in order.
var Metrics = []Metric{ErrorRatio, LatencyP99, Goodput}

// Series gives the samples of a service's metric every step over [from, to].
type Series interface {
	Samples(ctx context.Context, service string, m Metric, from, to time.Time, step time.Duration) ([]float64, error)
}

// SignalSeries reads the samples from a signals.Source with the Reader's
// templates, so the guardrail sees what the load score sees.
type SignalSeries struct {
	Source signals.Source
	Reader *signals.Reader
}

// Samples implements Series.
func (s SignalSeries) Samples(ctx context.Context, service string, m Metric, from, to time.Time, step time.Duration) ([]float64, error) {
	q, err := s.query(service, m)
	if err != nil {
		return nil, err
	}
	res, err := s.Source.QueryRange(ctx, q, signals.Range{Start: from, End: to, Step: step})
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s: %w", ErrSeries, service, m, err)
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

func (s SignalSeries) query(service string, m Metric) (string, error) {
	q := func(sig signals.Signal) (string, error) { return s.Reader.Query(sig, signals.PerService, service) }
	switch m {
	case ErrorRatio:
		return q(signals.ErrorRatio)
	case LatencyP99:
		return q(signals.LatencyP99)
	case Goodput:
		rr, err := q(signals.RequestRate)
		if err != nil {
			return "", err
		}
		sr, err := q(signals.ShedRatio)
		if err != nil {
			return "", err
		}
		er, err := q(signals.ErrorRatio)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("(%s) * (1 - (%s)) * (1 - (%s))", rr, sr, er), nil
	}
	return "", fmt.Errorf("%w: unknown metric %q", ErrSeries, m)
}
