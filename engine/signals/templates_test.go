package signals

import (
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"
)

func TestDefaultTemplatesRenderValidPromQL(t *testing.T) {
	r, err := NewReader(&fakeSource{}, ReaderOptions{})
	require.NoError(t, err)
	p := parser.NewParser(parser.Options{})
	for s := range DefaultTemplates() {
		for _, scope := range []Scope{PerService, PerInstance} {
			for _, svcs := range [][]string{nil, {"a"}, {"a", `we"ird\name`, "x.*"}} {
				q, err := r.Query(s, scope, svcs...)
				require.NoError(t, err)
				expr, err := p.ParseExpr(q)
				require.NoError(t, err, "%s %s %v: %s", s, scope, svcs, q)
				require.Equal(t, parser.ValueTypeVector, expr.Type(), s)
			}
		}
	}
}

func TestTemplateOverrides(t *testing.T) {
	tests := []struct {
		name      string
		overrides map[Signal]string
		want      string
	}{
		{"unknown signal", map[Signal]string{"latency_p95": "x"}, `templates: unknown signal "latency_p95"`},
		{"empty", map[Signal]string{CPU: "  "}, "templates.cpu: empty template"},
		{"template syntax", map[Signal]string{CPU: "sum({{.By}"}, "templates.cpu:"},
		{"unknown field", map[Signal]string{CPU: "sum by ({{.Grouping}}) (x)"}, "templates.cpu:"},
		{"bad promql", map[Signal]string{Memory: "sum by ({{.By}}) (rate(x[{{.Window}}])"}, "templates.memory: not valid PromQL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewReader(&fakeSource{}, ReaderOptions{Templates: tt.overrides})
			require.ErrorIs(t, err, ErrInvalidOption)
			require.ErrorContains(t, err, tt.want)
		})
	}
	r, err := NewReader(&fakeSource{}, ReaderOptions{Templates: map[Signal]string{
		CPU: `avg by ({{.By}}) (rate(container_cpu_usage_seconds_total{ {{.Selector}} }[{{.Window}}]))`,
	}})
	require.NoError(t, err)
	q, err := r.Query(CPU, PerInstance, "a")
	require.NoError(t, err)
	require.Equal(t, `avg by (service, instance) (rate(container_cpu_usage_seconds_total{ service="a", }[1m]))`, q)
	q, err = r.Query(Memory, PerService)
	require.NoError(t, err)
	require.Contains(t, q, "process_resident_memory_bytes", "other templates keep their defaults")
}

func TestReaderOptions(t *testing.T) {
	for _, o := range []ReaderOptions{{Window: -time.Second}, {Window: 1500 * time.Microsecond}, {Concurrency: -1}} {
		_, err := NewReader(&fakeSource{}, o)
		require.ErrorIs(t, err, ErrInvalidOption)
	}
	_, err := NewReader(nil, ReaderOptions{})
	require.ErrorIs(t, err, ErrInvalidOption)
	r, err := NewReader(&fakeSource{}, ReaderOptions{})
	require.NoError(t, err)
	_, err = r.Query("nope", PerService)
	require.ErrorIs(t, err, ErrInvalidOption)
}

func TestValueAndKeyStrings(t *testing.T) {
	require.Equal(t, "0.25", KnownValue(0.25).String())
	require.Equal(t, "unknown (missing)", Unknown(Missing, "").String())
	require.Equal(t, "unknown (stale: old)", Unknown(Stale, "old").String())
	require.Equal(t, "a/i", Key{"a", "i"}.String())
	require.Equal(t, "a", Key{Service: "a"}.String())
	require.Equal(t, `{a="1",b="x\"y"}`, Labels{"b": `x"y`, "a": "1"}.String())
	require.Equal(t, "vector", TypeVector.String())
	require.Equal(t, "instance", PerInstance.String())
}

// A template whose result is not grouped by exactly the scope's labels
// would answer several samples for a key (or none carrying them): it is
// refused at start, naming the template and what its grouping lacks or
// adds, not found at the first read.
func TestTemplateGrouping(t *testing.T) {
	tests := []struct {
		name string
		sig  Signal
		tmpl string
		want string // error substring; empty: accepted
	}{
		{"no aggregation", CPU, `rate(x{ {{.Selector}} }[{{.Window}}])`, "templates.cpu: "},
		{"sum without by", CPU, `sum(rate(x{ {{.Selector}} }[{{.Window}}]))`, "templates.cpu: "},
		{"by service only", CPU, `sum by (service) (x{ {{.Selector}} })`, "instance"},
		{"extra label", CPU, `sum by ({{.By}}, route) (x{ {{.Selector}} })`, "route"},
		{"without", CPU, `sum without (route) (x{ {{.Selector}} })`, "templates.cpu: "},
		{"or vector", CPU, `sum by ({{.By}}) (x{ {{.Selector}} }) or vector(0)`, "templates.cpu: "},
		{"scalar", CPU, `scalar(sum(x))`, "templates.cpu: "},
		{"class missing", ShedRatioByClass, `sum by ({{.By}}) (x{ {{.Selector}} })`, "class"},
		{"by", CPU, `max by ({{.By}}) (x{ {{.Selector}} })`, ""},
		{"topk", CPU, `topk(1, sum by ({{.By}}) (x{ {{.Selector}} }))`, ""},
		{"arithmetic", CPU, `2 * sum by ({{.By}}) (x{ {{.Selector}} }) / sum by ({{.By}}) (y)`, ""},
		{"clamp", CPU, `clamp_max(sum by ({{.By}}) (x{ {{.Selector}} }), 1)`, ""},
		{"subquery", CPU, `max_over_time(sum by ({{.By}}) (rate(x{ {{.Selector}} }[{{.Window}}]))[5m:])`, ""},
		{"quantile", CPU, `histogram_quantile(0.9, sum by ({{.By}}, le) (rate(b{ {{.Selector}} }[{{.Window}}])))`, ""},
		{"join", CPU, DefaultTemplates()[CPU], ""},
		{"one-sided join", CPU, `rate(x[{{.Window}}]) * on (instance) group_left (service) y`, "many side"},
		{"on keeps its labels", CPU, `sum by ({{.By}}) (x) / on ({{.By}}) sum by ({{.By}}, route) (y)`, ""},
		{"absent", CPU, `sum by ({{.By}}) (x) or absent(x)`, "absent()"},
		{"label_replace adds a label", CPU, `label_replace(sum by ({{.By}}) (x), "zone", "a", "", "")`, "zone"},
		{"class", ShedRatioByClass, `sum by ({{.By}}, class) (x{ {{.Selector}} })`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckTemplates(map[Signal]string{tt.sig: tt.tmpl})
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidOption)
			require.ErrorContains(t, err, tt.want)
		})
	}
}
