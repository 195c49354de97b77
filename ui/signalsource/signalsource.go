// Package signalsource draws a service's signals for the service page from
// the engine's metrics source (package governor.dev/governor/engine/signals:
// Prometheus or the embedded store), with the engine's own query templates so
// the charts show exactly what the engine reads: request rate, error ratio,
// p50 and p99 latency, in-flight requests against the concurrency limit, and
// the shed ratio.
package signalsource

import (
	"context"
	"errors"
	"fmt"
	"time"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui/model"
)

// ErrInvalid: bad options.
var ErrInvalid = errors.New("signalsource: invalid options")

// Options configure New.
type Options struct {
	// Source evaluates PromQL; required.
	Source signals.Source
	// Reader renders the signal queries; default one with the default
	// templates over Source.
	Reader *signals.Reader
	Clock  clock.Clock
	// Points per chart; default 120.
	Points int
}

// Source is a model.Charts over a metrics source.
type Source struct{ o Options }

var _ model.Charts = (*Source)(nil)

// New returns a Source.
func New(o Options) (*Source, error) {
	if o.Source == nil {
		return nil, fmt.Errorf("%w: Options.Source is required", ErrInvalid)
	}
	if o.Reader == nil {
		r, err := signals.NewReader(o.Source, signals.DefaultReaderOptions())
		if err != nil {
			return nil, err
		}
		o.Reader = r
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Points <= 1 {
		o.Points = 120
	}
	return &Source{o: o}, nil
}

type chartSpec struct {
	signal       signals.Signal
	title, unit  string
	scale        float64
	fixedPercent bool
}

// Specs are the charts, in page order.
var specs = []chartSpec{
	{signals.RequestRate, "Request rate", "req/s", 1, false},
	{signals.ErrorRatio, "Error ratio", "%", 100, true},
	{signals.LatencyP50, "p50 latency", "ms", 1000, false},
	{signals.LatencyP99, "p99 latency", "ms", 1000, false},
	{signals.InFlight, "In-flight requests", "req", 1, false},
	{signals.Limit, "Concurrency limit", "req", 1, false},
	{signals.ShedRatio, "Shed ratio (shed, rate limited, queue timeout)", "%", 100, true},
}

// Charts queries each signal of the service over the last span. A signal
// that fails is returned without points; if every one fails the error is
// returned too.
func (s *Source) Charts(ctx context.Context, service string, span time.Duration) ([]model.Chart, error) {
	end := s.o.Clock.Now()
	step := span / time.Duration(s.o.Points-1)
	step = max(step.Truncate(time.Second), time.Second)
	rng := signals.Range{Start: end.Add(-span), End: end, Step: step}
	out := make([]model.Chart, 0, len(specs))
	var errs []error
	for _, sp := range specs {
		c := model.Chart{Title: sp.title, Unit: sp.unit}
		if sp.fixedPercent {
			c.Min, c.Max = 0, 100
		}
		q, err := s.o.Reader.Query(sp.signal, signals.PerService, service)
		if err == nil {
			var res *signals.Result
			if res, err = s.o.Source.QueryRange(ctx, q, rng); err == nil {
				for _, ser := range res.Series {
					if ser.Labels["service"] != service {
						continue
					}
					for _, p := range ser.Points {
						c.Points = append(c.Points, model.Point{At: p.T, Value: p.V * sp.scale})
					}
				}
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", sp.title, err))
		}
		out = append(out, c)
	}
	if len(errs) == len(specs) {
		return out, errors.Join(errs...)
	}
	return out, nil
}
