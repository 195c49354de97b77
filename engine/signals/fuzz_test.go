package signals

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/prometheus/promql/parser"
)

// FuzzTemplateOverride feeds arbitrary configuration text as a template
// override: it must be refused with ErrInvalidOption or accepted, never
// panic, and an accepted template must render valid PromQL for any service
// names.
func FuzzTemplateOverride(f *testing.F) {
	for _, s := range []string{
		DefaultTemplates()[LatencyP99],
		DefaultTemplates()[ErrorRatio],
		"sum by ({{.By}}) (x)",
		"{{.Selector}}",
		"{{template \"x\"}}",
		"{{range .}}{{end}}",
		"sum by ({{.By}}) (rate(x{ {{.Selector}} }[{{.Window}}]))",
		"{{",
		"\x00",
	} {
		f.Add(s, "checkout")
	}
	p := parser.NewParser(parser.Options{})
	f.Fuzz(func(t *testing.T, tmpl, service string) {
		r, err := NewReader(&fakeSource{}, ReaderOptions{Templates: map[Signal]string{CPU: tmpl}})
		if err != nil {
			if !strings.HasPrefix(err.Error(), ErrInvalidOption.Error()) {
				t.Fatalf("error without the sentinel: %v", err)
			}
			return
		}
		if service == "" {
			return
		}
		q, err := r.Query(CPU, PerInstance, service, "other")
		if !utf8.ValidString(service) {
			if !errors.Is(err, ErrInvalidOption) {
				t.Fatalf("service name %q is not UTF-8 but was accepted", service)
			}
			return
		}
		if err != nil {
			t.Fatalf("accepted template failed to render: %v", err)
		}
		if _, err := p.ParseExpr(q); err != nil {
			t.Fatalf("accepted template rendered invalid PromQL for %q: %v\n%s", service, err, q)
		}
	})
}
