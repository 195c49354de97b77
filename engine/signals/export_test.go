package signals

import (
	"context"
	"time"

	"github.com/prometheus/common/model"
)

// SharedRateQueries names the shared queries a SeriesSource answers, by
// their rendered PromQL for a scope, services and window, so tests can ask
// the store's PromQL engine the same question.
func SharedRateQueries(scope Scope, window time.Duration, services ...string) (map[string]string, error) {
	sel, err := selector(services)
	if err != nil {
		return nil, err
	}
	data := TemplateData{Selector: sel, By: scope.by(), Window: model.Duration(window).String()}
	out := map[string]string{}
	for q, rq := range sharedRates {
		t, err := parseShared(q)
		if err != nil {
			return nil, err
		}
		text, err := render(t, data)
		if err != nil {
			return nil, err
		}
		out[rq.metric] = text
	}
	return out, nil
}

// EvalSharedRate evaluates the shared rate query of metric from src as the
// Reader does.
func EvalSharedRate(ctx context.Context, src SeriesSource, metric string, scope Scope, window time.Duration, at time.Time, services ...string) (*Result, error) {
	for _, rq := range sharedRates {
		if rq.metric == metric {
			return rq.eval(ctx, src, services, scope, window, at)
		}
	}
	return nil, ErrInvalidOption
}

// CounterRate exposes counterRate.
var CounterRate = counterRate

// GaugeSignals are the signals whose default templates a SeriesSource
// answers from the newest samples.
func GaugeSignals() []Signal {
	return []Signal{InFlight, Limit, Freshness, Reporting}
}

// EvalGauge evaluates the default template of s from src as the Reader
// does.
func EvalGauge(ctx context.Context, src SeriesSource, s Signal, scope Scope, at time.Time, services ...string) (*Result, error) {
	gq, ok := ownGauges[s]
	if !ok {
		return nil, ErrInvalidOption
	}
	return gq.eval(ctx, src, services, scope, at)
}
