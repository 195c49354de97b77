// Package signalsource draws a service's signals for the service page and
// the recommendations from the engine's metrics source (package
// governor.dev/governor/engine/signals: Prometheus or the embedded store),
// with the engine's own query templates so the charts show exactly what the
// engine reads: request rate, error ratio, p50 and p99 latency, in-flight
// requests against the concurrency limit, and the shed ratio. Besides those
// it draws the engine's smoothed load score (governor_engine_load_score),
// admitted and shed traffic by priority class (governor_sdk_requests_total
// by class and outcome) and the downstream breakers' states
// (governor_sdk_breaker_state), see ServiceCharts.
//
// A page's queries run at once, bounded together by Options.Timeout, and
// the overview's metrics read by Enriched.WithTimeout: a hung metrics
// source costs a page that long, its charts saying it took too long.
//
// A chart whose query failed says why in Failed (and NoData), so a page
// tells "the metrics source did not answer" (or took too long, or refused
// the query) from "no traffic", in the words the overview gives a failed
// signal; a chart whose answer came with a warning that data may be
// missing (a federated store's partial response, see signals.PartialData)
// carries it in Partial, joined with the others of that answer, at most
// three and each cut to 200 bytes. Enriched names the overview's signals
// (request rate, error ratio, p99, shed by class, freshness) whose query
// failed or came back partial in a *model.SignalError, so the overview says
// so rather than showing them as no data.
package signalsource

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	prommodel "github.com/prometheus/common/model"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui/model"
)

// ErrInvalid: bad options or arguments.
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
	// Window is the rate window of the class traffic charts; default 1m.
	// A range whose step is longer uses the step, so no sample is skipped.
	Window time.Duration
	// Timeout bounds one call (Charts, Window, ServiceCharts), whose
	// queries run at once: a hung metrics source costs a page at most this,
	// and its charts say it took too long. Default DefaultTimeout.
	Timeout time.Duration
}

// DefaultTimeout is the default Options.Timeout and the bound of
// Enriched.Services.
const DefaultTimeout = 15 * time.Second

// Source is a model.Charts over a metrics source; it also implements
// model.Window and model.ServiceCharts.
type Source struct{ o Options }

var (
	_ model.Charts        = (*Source)(nil)
	_ model.Window        = (*Source)(nil)
	_ model.ServiceCharts = (*Source)(nil)
)

// New returns a Source.
func New(o Options) (*Source, error) {
	if o.Source == nil {
		return nil, fmt.Errorf("%w: Options.Source is required", ErrInvalid)
	}
	if o.Window < 0 {
		return nil, fmt.Errorf("%w: Options.Window is %s, want a positive duration", ErrInvalid, o.Window)
	}
	if o.Timeout < 0 {
		return nil, fmt.Errorf("%w: Options.Timeout is %s, want a positive duration", ErrInvalid, o.Timeout)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
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
	if o.Window == 0 {
		o.Window = time.Minute
	}
	return &Source{o: o}, nil
}

type chartSpec struct {
	name        string
	signal      signals.Signal // "" for the load score
	title, unit string
	scale       float64
	min, max    float64
}

// specs are the service page's charts, in page order.
var specs = []chartSpec{
	{model.SignalRequestRate, signals.RequestRate, "Request rate", "req/s", 1, 0, 0},
	{model.SignalErrorRatio, signals.ErrorRatio, "Error ratio", "%", 100, 0, 100},
	{string(signals.LatencyP50), signals.LatencyP50, "p50 latency", "ms", 1000, 0, 0},
	{model.SignalLatencyP99, signals.LatencyP99, "p99 latency", "ms", 1000, 0, 0},
	{string(signals.InFlight), signals.InFlight, "In-flight requests", "req", 1, 0, 0},
	{string(signals.Limit), signals.Limit, "Concurrency limit", "req", 1, 0, 0},
	{string(signals.ShedRatio), signals.ShedRatio, "Shed ratio (shed, rate limited, queue timeout)", "%", 100, 0, 100},
}

// loadScore is the engine's smoothed score, which only the engine's own
// /metrics exports: it has data where the metrics source scrapes the engine.
var loadScore = chartSpec{model.SignalLoadScore, "", "Load score", "", 1, 0, 1}

func specOf(name string) (chartSpec, bool) {
	if name == loadScore.name {
		return loadScore, true
	}
	for _, sp := range specs {
		if sp.name == name {
			return sp, true
		}
	}
	return chartSpec{}, false
}

// rangeOf spreads Points over [start, end] in whole seconds, counted back
// from end so the last point is at end (the latest reading); start moves
// later by less than a step when the step is rounded down.
func (s *Source) rangeOf(start, end time.Time) signals.Range {
	step := end.Sub(start) / time.Duration(s.o.Points-1)
	step = max(step.Truncate(time.Second), time.Second)
	if n := end.Sub(start) / step; n > 0 {
		start = end.Add(-n * step)
	}
	return signals.Range{Start: start, End: end, Step: step}
}

// Charts queries each signal of the service over the last span. A signal
// that fails is returned without points and says why in Failed and NoData;
// if every one fails the error is returned too. A partial answer's warning
// is in Partial.
func (s *Source) Charts(ctx context.Context, service string, span time.Duration) ([]model.Chart, error) {
	end := s.o.Clock.Now()
	names := make([]string, len(specs))
	for i, sp := range specs {
		names[i] = sp.name
	}
	return s.Window(ctx, service, end.Add(-span), end, names...)
}

// Window queries the named signals (model.Signal*, or any engine signal of
// the service page) of the service between start and end, in the order
// asked. Unknown names and an inverted window are refused before any query;
// a failed query leaves its chart without points, with the reason in
// Failed and NoData, and only when every one fails is the error returned
// too. A warning that data may be missing is in Partial. NaN and infinite
// samples are no data: they are left out.
func (s *Source) Window(ctx context.Context, service string, start, end time.Time, names ...string) ([]model.Chart, error) {
	if service == "" {
		return nil, fmt.Errorf("%w: empty service name", ErrInvalid)
	}
	if end.Before(start) {
		return nil, fmt.Errorf("%w: window end %s is before its start %s", ErrInvalid, end.Format(time.RFC3339), start.Format(time.RFC3339))
	}
	sps := make([]chartSpec, len(names))
	for i, n := range names {
		sp, ok := specOf(n)
		if !ok {
			return nil, fmt.Errorf("%w: names[%d]: unknown signal %q", ErrInvalid, i, n)
		}
		sps[i] = sp
	}
	rng := s.rangeOf(start, end)
	qs := make([]string, len(sps))
	metrics := make([]string, len(sps))
	qerrs := make([]error, len(sps))
	for i, sp := range sps {
		qs[i], metrics[i], qerrs[i] = s.query(sp, service)
	}
	results := s.queryAll(ctx, qs, qerrs, rng)
	out := make([]model.Chart, 0, len(sps))
	var errs []error
	for i, sp := range sps {
		c := model.Chart{Title: sp.title, Unit: sp.unit, Min: sp.min, Max: sp.max}
		metric := metrics[i]
		res, err := results[i].res, results[i].err
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", sp.title, err))
			c.Failed = queryFailure(err)
			c.NoData = c.Failed
			out = append(out, c)
			continue
		}
		c.Partial = partial(res.Warnings)
		for _, ser := range res.Series {
			if ser.Labels["service"] != service {
				continue
			}
			for _, p := range ser.Points {
				if finite(p.V) {
					c.Points = append(c.Points, model.Point{At: p.T, Value: p.V * sp.scale})
				}
			}
		}
		if len(c.Points) == 0 {
			c.NoData = "no samples of " + metric + " for " + service + " in this range"
			if sp.signal == "" {
				c.NoData += " (the metrics source does not scrape the engine)"
			}
		}
		out = append(out, c)
	}
	if len(errs) > 0 && len(errs) == len(sps) {
		return out, errors.Join(errs...)
	}
	return out, nil
}

type answer struct {
	res *signals.Result
	err error
}

// queryAll runs the range queries at once within Options.Timeout and
// returns their answers in order; a query whose rendering failed (qerrs[i],
// qerrs may be nil) is not run and answers that error.
func (s *Source) queryAll(ctx context.Context, qs []string, qerrs []error, rng signals.Range) []answer {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	out := make([]answer, len(qs))
	var wg sync.WaitGroup
	for i, q := range qs {
		if qerrs != nil && qerrs[i] != nil {
			out[i] = answer{nil, qerrs[i]}
			continue
		}
		wg.Go(func() {
			res, err := s.o.Source.QueryRange(ctx, q, rng)
			out[i] = answer{res, err}
		})
	}
	wg.Wait()
	return out
}

// Bounds of Chart.Partial: a federated query may warn once per store, and
// a store's warning may carry a long error chain.
const (
	maxWarnings    = 3
	maxWarningSize = 200
)

// partial joins the warnings of ws that say data may be missing
// (signals.PartialData), each once and cut to maxWarningSize bytes, at most
// maxWarnings of them and how many more there are; "" when there is none.
func partial(ws []string) string {
	var seen []string
	more := 0
	for _, w := range ws {
		w = strings.TrimSpace(w)
		if w == "" || !signals.PartialData(w) || slices.Contains(seen, w) {
			continue
		}
		if len(seen) == maxWarnings {
			more++
			continue
		}
		seen = append(seen, w)
	}
	for i, w := range seen {
		seen[i] = cut(w)
	}
	out := strings.Join(seen, "; ")
	if more > 0 {
		out += fmt.Sprintf(" (and %d more)", more)
	}
	return out
}

// finite tells a sample from no data: PromQL answers NaN for a ratio
// over no traffic (0/0) and for a quantile of an empty histogram, which a
// chart shows as a gap, never as a value.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// query returns the PromQL of a spec and the metric it reads.
func (s *Source) query(sp chartSpec, service string) (q, metric string, err error) {
	if sp.signal == "" {
		return "max by (service) (governor_engine_load_score{service=" + strconv.Quote(service) + "})", "governor_engine_load_score", nil
	}
	q, err = s.o.Reader.Query(sp.signal, signals.PerService, service)
	return q, "the " + string(sp.signal) + " signal", err
}

// queryFailure says in a few words why a query of the metrics source
// failed, without the backend's details: the one wording of a chart's
// Failed and of the overview's failed signal (model.SignalProblem.Reason).
func queryFailure(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "the metrics source took too long"
	case errors.Is(err, signals.ErrUnavailable):
		return "the metrics source did not answer"
	case errors.Is(err, signals.ErrQuery):
		return "the metrics source refused the query"
	}
	return "the metrics query failed"
}

// rateWindow is the rate window of a range: the configured window, or the
// step when that is longer.
func (s *Source) rateWindow(rng signals.Range) string {
	return prommodel.Duration(max(s.o.Window, rng.Step)).String()
}
