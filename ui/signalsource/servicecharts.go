package signalsource

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/ui/model"
)

// BreakerLevels name the values of governor_sdk_breaker_state.
var BreakerLevels = []string{"closed", "half-open", "open"}

// ServiceCharts draws, over the last span: admitted and shed traffic
// (shed, rate limited, queue timeout) by priority class in requests per
// second, from governor_sdk_requests_total by class and outcome, and the
// state of each downstream breaker, from governor_sdk_breaker_state (0
// closed, 1 half-open, 2 open; the worst instance's). The classes come in
// priority order, critical first; the downstreams by name. A chart whose
// query fails or finds nothing says why in NoData, a failure also in
// Failed; if every query fails the error is returned too. A warning that
// data may be missing is in Partial.
func (s *Source) ServiceCharts(ctx context.Context, service string, span time.Duration) ([]model.SeriesChart, error) {
	if service == "" {
		return nil, fmt.Errorf("%w: empty service name", ErrInvalid)
	}
	end := s.o.Clock.Now()
	rng := s.rangeOf(end.Add(-span), end)
	sel := "service=" + strconv.Quote(service)
	w := s.rateWindow(rng)
	queries := []struct {
		chart  model.SeriesChart
		label  string
		q      string
		metric string
	}{
		{model.SeriesChart{Title: "Admitted by class", Unit: "req/s", Of: "Class"}, "class",
			`sum by (class) (rate(governor_sdk_requests_total{` + sel + `,outcome="admitted"}[` + w + `]))`, "governor_sdk_requests_total"},
		{model.SeriesChart{Title: "Refused by class (shed, rate limited, queue timeout, deadline, overload)", Unit: "req/s", Of: "Class"}, "class",
			`sum by (class) (rate(governor_sdk_requests_total{` + sel + `,outcome=~"` + signals.ShedOutcomes + `"}[` + w + `]))`, "governor_sdk_requests_total"},
		{model.SeriesChart{Title: "Breaker states", Of: "Downstream", Min: 0, Max: 2, Levels: BreakerLevels}, "downstream",
			`max by (downstream) (governor_sdk_breaker_state{` + sel + `})`, "governor_sdk_breaker_state"},
	}
	qs := make([]string, len(queries))
	for i, qq := range queries {
		qs[i] = qq.q
	}
	results := s.queryAll(ctx, qs, nil, rng)
	out := make([]model.SeriesChart, 0, len(queries))
	var errs []error
	for i, qq := range queries {
		c := qq.chart
		res, err := results[i].res, results[i].err
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.Title, err))
			c.Failed = queryFailure(err)
			c.NoData = c.Failed
			out = append(out, c)
			continue
		}
		c.Partial = partial(res.Warnings)
		c.Series = seriesBy(res, qq.label)
		if qq.label == "class" {
			c.Series = byClass(c.Series)
		}
		if len(c.Series) == 0 {
			c.NoData = "no samples of " + qq.metric + " for " + service + " in this range"
			if qq.label == "downstream" {
				c.NoData = "no downstream breaker in " + service + "'s metrics (governor_sdk_breaker_state) in this range"
			}
		}
		out = append(out, c)
	}
	if len(errs) == len(queries) {
		return out, errors.Join(errs...)
	}
	return out, nil
}

// seriesBy turns a matrix into series named by a label, sorted by name,
// without NaN and infinite samples.
func seriesBy(res *signals.Result, label string) []model.Series {
	var out []model.Series
	for _, ser := range res.Series {
		if len(ser.Points) == 0 {
			continue
		}
		name := ser.Labels[label]
		if name == "" {
			name = "(no " + label + ")"
		}
		pts := make([]model.Point, 0, len(ser.Points))
		for _, p := range ser.Points {
			if finite(p.V) {
				pts = append(pts, model.Point{At: p.T, Value: p.V})
			}
		}
		if len(pts) == 0 {
			continue
		}
		out = append(out, model.Series{Name: name, Points: pts})
	}
	slices.SortFunc(out, func(a, b model.Series) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return out
}

// byClass puts the SDK's four classes first, in priority order, each with
// an empty series when it has no data, so every chart's legend is the same.
func byClass(in []model.Series) []model.Series {
	if len(in) == 0 {
		return nil
	}
	out := make([]model.Series, 0, len(rules.Classes)+len(in))
	for _, c := range rules.Classes {
		s := model.Series{Name: string(c)}
		if i := slices.IndexFunc(in, func(x model.Series) bool { return x.Name == string(c) }); i >= 0 {
			s = in[i]
		}
		out = append(out, s)
	}
	for _, s := range in {
		if !slices.ContainsFunc(rules.Classes[:], func(c rules.Class) bool { return string(c) == s.Name }) {
			out = append(out, s)
		}
	}
	return out
}
