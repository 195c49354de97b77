package signals

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/template"

	"github.com/prometheus/prometheus/promql/parser"
)

// TemplateData is what a signal template is executed with.
type TemplateData struct {
	// Selector restricts the query to the requested services. It is empty or
	// a list of label matchers ending in a comma, so a template puts it first
	// inside a selector's braces: metric{ {{.Selector}}outcome="admitted"}.
	Selector string
	// By is the grouping: "service" per service, "service, instance" per
	// instance. Every template must return one sample per group carrying
	// these labels.
	By string
	// Window is the rate window, a PromQL duration such as "1m".
	Window string
}

// DefaultTemplates returns the PromQL templates written against the SDK's
// metrics contract (docs/metrics.md). The map is a fresh copy.
//
// Ratio templates fall back to a zero numerator ("or 0 * denominator") when
// the numerator series does not exist yet, because client_golang creates a
// labelled counter only on first use: an instance that served requests but
// never failed one has an error ratio of zero, not an unknown one. With no
// requests at all the denominator is zero and the ratio is unknown.
//
// CPU and memory come from the process collector, whose series may lack the
// service label; they are joined to the service through the SDK's
// governor_sdk_rules_version gauge on (job, instance).
func DefaultTemplates() map[Signal]string {
	return map[Signal]string{
		RequestRate: `sum by ({{.By}}) (rate(governor_sdk_requests_total{ {{.Selector}}` + offered + `}[{{.Window}}]))`,
		ErrorRatio: `(
  sum by ({{.By}}) (rate(governor_sdk_request_errors_total{ {{.Selector}} }[{{.Window}}]))
  or
  0 * sum by ({{.By}}) (rate(governor_sdk_requests_total{ {{.Selector}}outcome="admitted"}[{{.Window}}]))
)
/
sum by ({{.By}}) (rate(governor_sdk_requests_total{ {{.Selector}}outcome="admitted"}[{{.Window}}]))`,
		LatencyP50: `histogram_quantile(0.5, sum by ({{.By}}, le) (rate(governor_sdk_request_duration_seconds_bucket{ {{.Selector}} }[{{.Window}}])))`,
		LatencyP99: `histogram_quantile(0.99, sum by ({{.By}}, le) (rate(governor_sdk_request_duration_seconds_bucket{ {{.Selector}} }[{{.Window}}])))`,
		InFlight:   `sum by ({{.By}}) (governor_sdk_inflight{ {{.Selector}} })`,
		Limit:      `sum by ({{.By}}) (governor_sdk_limit{ {{.Selector}} })`,
		ShedRatio: `(
  sum by ({{.By}}) (rate(governor_sdk_requests_total{ {{.Selector}}outcome=~"` + ShedOutcomes + `"}[{{.Window}}]))
  or
  0 * sum by ({{.By}}) (rate(governor_sdk_requests_total{ {{.Selector}}` + offered + `}[{{.Window}}]))
)
/
sum by ({{.By}}) (rate(governor_sdk_requests_total{ {{.Selector}}` + offered + `}[{{.Window}}]))`,
		ShedRatioByClass: `(
  sum by ({{.By}}, class) (rate(governor_sdk_requests_total{ {{.Selector}}outcome=~"` + ShedOutcomes + `"}[{{.Window}}]))
  or
  0 * sum by ({{.By}}, class) (rate(governor_sdk_requests_total{ {{.Selector}}` + offered + `}[{{.Window}}]))
)
/
sum by ({{.By}}, class) (rate(governor_sdk_requests_total{ {{.Selector}}` + offered + `}[{{.Window}}]))`,
		QueueDelayP99: `histogram_quantile(0.99, sum by ({{.By}}, le) (rate(governor_sdk_queue_delay_seconds_bucket{ {{.Selector}} }[{{.Window}}])))`,
		CPU: `avg by ({{.By}}) (
  rate(process_cpu_seconds_total[{{.Window}}])
  * on (job, instance) group_left (service)
  group by (job, instance, service) (governor_sdk_rules_version{ {{.Selector}} })
)`,
		Memory: `avg by ({{.By}}) (
  process_resident_memory_bytes
  * on (job, instance) group_left (service)
  group by (job, instance, service) (governor_sdk_rules_version{ {{.Selector}} })
)`,
		Freshness: `max by ({{.By}}) (timestamp(governor_sdk_rules_version{ {{.Selector}} }))`,
		Reporting: `count by ({{.By}}) (governor_sdk_rules_version{ {{.Selector}} })`,
	}
}

// CheckTemplates validates template overrides as NewReader would, so
// configuration can be refused before anything starts: a template must
// parse, use only the fields of TemplateData, render valid PromQL for both
// scopes, and answer an instant vector grouped by exactly the scope's
// labels, {{.By}} (with class too for ShedRatioByClass), e.g. through an
// outer sum by ({{.By}}) (...). The error names the template as
// templates.<signal>.
func CheckTemplates(overrides map[Signal]string) error {
	_, err := compileTemplates(overrides)
	return err
}

// templateSet is a validated, compiled set of templates.
type templateSet map[Signal]*template.Template

// compileTemplates merges overrides into the defaults, parses every template
// and checks that it renders, for both scopes, to valid PromQL whose result
// is grouped by exactly the scope's labels (see checkGrouping). It refuses
// the whole set on the first problem, naming the signal.
func compileTemplates(overrides map[Signal]string) (templateSet, error) {
	src := DefaultTemplates()
	for _, s := range slices.Sorted(maps.Keys(overrides)) {
		if _, ok := src[s]; !ok {
			return nil, fmt.Errorf("%w: templates: unknown signal %q", ErrInvalidOption, s)
		}
		if strings.TrimSpace(overrides[s]) == "" {
			return nil, fmt.Errorf("%w: templates.%s: empty template", ErrInvalidOption, s)
		}
		src[s] = overrides[s]
	}
	p := parser.NewParser(parser.Options{})
	set := make(templateSet, len(src))
	for _, s := range slices.Sorted(maps.Keys(src)) {
		t, err := template.New(string(s)).Option("missingkey=error").Parse(src[s])
		if err != nil {
			return nil, fmt.Errorf("%w: templates.%s: %v", ErrInvalidOption, s, err)
		}
		for _, scope := range []struct {
			data TemplateData
			want []string
		}{
			{TemplateData{Selector: "", By: byService, Window: "1m"}, []string{"service"}},
			{TemplateData{Selector: `service="x",`, By: byInstance, Window: "1m"}, []string{"service", "instance"}},
		} {
			q, err := render(t, scope.data)
			if err != nil {
				return nil, fmt.Errorf("%w: templates.%s: %v", ErrInvalidOption, s, err)
			}
			expr, err := p.ParseExpr(q)
			if err != nil {
				return nil, fmt.Errorf("%w: templates.%s: not valid PromQL: %v", ErrInvalidOption, s, err)
			}
			if s == ShedRatioByClass {
				scope.want = append(scope.want, "class")
			}
			if err := checkGrouping(expr, scope.want); err != nil {
				return nil, fmt.Errorf("%w: templates.%s: with {{.By}} = %q, must answer one sample per (%s): %v",
					ErrInvalidOption, s, scope.data.By, strings.Join(scope.want, ", "), err)
			}
		}
		set[s] = t
	}
	return set, nil
}

func render(t *template.Template, d TemplateData) (string, error) {
	var b strings.Builder
	if err := t.Execute(&b, d); err != nil {
		return "", err
	}
	return b.String(), nil
}
