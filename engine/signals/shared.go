package signals

import (
	"context"
	"errors"
	"maps"
	"slices"
	"text/template"
	"time"
)

// PromQLSource is a Source that evaluates any PromQL expression, as a
// Prometheus-compatible server and the embedded store do. From such a source
// the Reader reads the signals whose templates are the defaults through a few
// shared queries (see sharedQueries) instead of one query per signal. A Source
// that does not implement it, such as a test double answering the rendered
// templates, is asked one query per signal.
type PromQLSource interface {
	Source
	// EvaluatesPromQL declares that Query accepts any instant PromQL query.
	EvaluatesPromQL()
}

// sharedQuery is a query whose samples several default-template signals are
// derived from in Go, so the series behind them are selected and decoded
// once per Read rather than once per signal.
type sharedQuery int

const (
	// sharedRequests is the rate of governor_sdk_requests_total by scope,
	// class and outcome: request rate, shed ratio (overall and by class) and
	// the error ratio's denominator.
	sharedRequests sharedQuery = iota
	// sharedErrors is the error rate by scope: the error ratio's numerator.
	sharedErrors
	// sharedLatency is the rate of the latency buckets by scope and le: p50
	// and p99.
	sharedLatency
	// sharedProcess is CPU and memory, joined to their services once for
	// both and told apart by the governor_signal label. A join the templates
	// would refuse (one target under two services) fails both signals.
	sharedProcess
	// sharedQueue is the rate of the queue delay buckets by scope and le:
	// the queue delay p99.
	sharedQueue
	numShared
)

var sharedTemplates = [numShared]string{
	sharedRequests: `sum by ({{.By}}, class, outcome) (rate(governor_sdk_requests_total{ {{.Selector}} }[{{.Window}}]))`,
	sharedErrors:   `sum by ({{.By}}) (rate(governor_sdk_request_errors_total{ {{.Selector}} }[{{.Window}}]))`,
	sharedLatency:  `sum by ({{.By}}, le) (rate(governor_sdk_request_duration_seconds_bucket{ {{.Selector}} }[{{.Window}}]))`,
	sharedQueue:    `sum by ({{.By}}, le) (rate(governor_sdk_queue_delay_seconds_bucket{ {{.Selector}} }[{{.Window}}]))`,
	sharedProcess: `avg by ({{.By}}, governor_signal) (
  (
    label_replace(rate(process_cpu_seconds_total[{{.Window}}]), "governor_signal", "cpu", "", "")
    or
    label_replace(process_resident_memory_bytes, "governor_signal", "memory", "", "")
  )
  * on (job, instance) group_left (service)
  group by (job, instance, service) (governor_sdk_rules_version{ {{.Selector}} })
)`,
}

// sharedNeeds lists, per signal, the shared queries it is derived from.
var sharedNeeds = map[Signal][]sharedQuery{
	RequestRate:      {sharedRequests},
	ShedRatio:        {sharedRequests},
	ShedRatioByClass: {sharedRequests},
	ErrorRatio:       {sharedRequests, sharedErrors},
	LatencyP50:       {sharedLatency},
	LatencyP99:       {sharedLatency},
	QueueDelayP99:    {sharedQueue},
	CPU:              {sharedProcess},
	Memory:           {sharedProcess},
}

// plan splits the signals between shared queries and their own templates.
type plan struct {
	shared  [numShared]*template.Template // nil: not needed
	derived []Signal                      // signals derived from shared queries
	own     []Signal                      // signals read through their own template
}

// newPlan derives from shared queries every signal whose template is not
// overridden; the others, and everything when perSignal is set, keep one
// query each.
func newPlan(tmpl templateSet, overrides map[Signal]string, perSignal bool) (plan, error) {
	var p plan
	for _, s := range slices.Sorted(maps.Keys(tmpl)) {
		needs, ok := sharedNeeds[s]
		if _, overridden := overrides[s]; perSignal || overridden || !ok {
			p.own = append(p.own, s)
			continue
		}
		p.derived = append(p.derived, s)
		for _, q := range needs {
			if p.shared[q] != nil {
				continue
			}
			t, err := parseShared(q)
			if err != nil {
				return plan{}, err
			}
			p.shared[q] = t
		}
	}
	return p, nil
}

func parseShared(q sharedQuery) (*template.Template, error) {
	return template.New("shared").Option("missingkey=error").Parse(sharedTemplates[q])
}

// sharedAnswer is the outcome of one shared query.
type sharedAnswer struct {
	res *Result
	err error
}

// readShared runs the plan's shared queries through run, which bounds
// concurrency, and derives the answers of the plan's derived signals. From
// a SeriesSource the rate queries are evaluated here (see rateQuery.eval),
// and sent to the source as PromQL only when a series holds native
// histograms.
func (r *Reader) readShared(ctx context.Context, at time.Time, data TemplateData, scope Scope, services []string,
	run func(ask func() (*Result, error), done func(*Result, error))) (func() []answer, error) {
	var got [numShared]sharedAnswer
	series, _ := r.src.(SeriesSource)
	for q, t := range r.plan.shared {
		if t == nil {
			continue
		}
		text, err := render(t, data)
		if err != nil {
			return nil, err
		}
		ask := func() (*Result, error) { return r.src.Query(ctx, text, at) }
		if rq, ok := sharedRates[sharedQuery(q)]; ok && series != nil {
			ask = func() (*Result, error) {
				res, err := rq.eval(ctx, series, services, scope, r.opts.Window, at)
				if errors.Is(err, ErrNotFloat) {
					return r.src.Query(ctx, text, at)
				}
				return res, err
			}
		}
		run(ask, func(res *Result, err error) { got[q] = sharedAnswer{res: res, err: err} })
	}
	return func() []answer { return derive(r.plan.derived, got, scope) }, nil
}
