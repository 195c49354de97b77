package rule

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/prometheus/prometheus/promql/parser"

	"governor.dev/governor/alerts"
)

// AlertNameLabel names the rule on every alert it raises.
const AlertNameLabel = "alertname"

// Rule is one alert rule. Exactly one of Expr and Event is set.
type Rule struct {
	// Name is the alertname label; unique within a rule set.
	Name string `json:"name"`
	// Expr is a PromQL expression: every series it returns is an alert.
	Expr string `json:"expr,omitempty"`
	// Event is the engine event kind that raises the alert (see Event).
	Event string `json:"event,omitempty"`
	// Severity is the tier. For event rules it may be empty: the event's
	// severity is used (anomaly levels).
	Severity alerts.Severity `json:"severity,omitempty"`
	// For is how long the condition must hold before the alert fires.
	For time.Duration `json:"for,omitempty"`
	// KeepFiringFor keeps a firing alert firing this long after the
	// condition stops holding.
	KeepFiringFor time.Duration `json:"keep_firing_for,omitempty"`
	// ResolveAfter (event rules) resolves an alert this long after its last
	// event unless a resolving event comes first. Default 15m.
	ResolveAfter time.Duration `json:"resolve_after,omitempty"`
	// Labels are added to every alert (one set to "" removes the label, as
	// in Prometheus: an empty value is no label); Annotations (summary,
	// description, runbook_url) are text/template strings with $labels and
	// $value.
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	// Disabled rules are kept but not evaluated.
	Disabled bool `json:"disabled,omitempty"`
}

// DefaultResolveAfter is the ResolveAfter of event rules that leave it unset.
const DefaultResolveAfter = 15 * time.Minute

func (r Rule) resolveAfter() time.Duration {
	if r.ResolveAfter > 0 {
		return r.ResolveAfter
	}
	return DefaultResolveAfter
}

// Validate checks the rule and names the first bad field. A PromQL
// expression that does not parse is refused with the position of the error.
func (r Rule) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: rule %q: %s: %s", alerts.ErrInvalid, r.Name, field, fmt.Sprintf(format, args...))
	}
	if r.Name == "" {
		return bad("name", "must not be empty")
	}
	switch {
	case r.Expr == "" && r.Event == "":
		return bad("expr", "one of expr and event is required")
	case r.Expr != "" && r.Event != "":
		return bad("expr", "expr and event are exclusive")
	case r.Expr != "":
		if _, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr); err != nil {
			return bad("expr", "%s", positioned(r.Expr, err))
		}
	}
	if r.Severity != "" || r.Event == "" {
		if _, err := alerts.ParseSeverity(string(r.Severity)); err != nil {
			return bad("severity", "%q: want P0, P1 or P2", r.Severity)
		}
	}
	for f, d := range map[string]time.Duration{"for": r.For, "keep_firing_for": r.KeepFiringFor, "resolve_after": r.ResolveAfter} {
		if d < 0 {
			return bad(f, "must not be negative, got %s", d)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(r.Labels)) {
		if _, err := alerts.NewMatcher(alerts.MatchEqual, k, ""); err != nil {
			return bad("labels", "name %q is not a valid label name", k)
		}
		if k == AlertNameLabel || k == alerts.SeverityLabel {
			return bad("labels", "%q is set from the rule itself", k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(r.Annotations)) {
		if _, err := parseTemplate(k, r.Annotations[k]); err != nil {
			return bad("annotations."+k, "%v", err)
		}
	}
	return nil
}

// positioned renders a PromQL parse error with line:column and the offset.
func positioned(expr string, err error) string {
	var pe parser.ParseErrors
	if errors.As(err, &pe) && len(pe) > 0 {
		e := pe[0]
		return fmt.Sprintf("position %d (%s): %s", e.PositionRange.Start, e.PositionRange.StartPosInput(expr, 0), e.Err)
	}
	return err.Error()
}

const templatePrefix = "{{$labels := .Labels}}{{$value := .Value}}"

func parseTemplate(name, text string) (*template.Template, error) {
	return template.New(name).Option("missingkey=zero").Parse(templatePrefix + text)
}

// expand renders the annotations for one alert; a template that fails at
// run time leaves its raw text and the error.
func expand(annotations map[string]string, labels alerts.Labels, value float64) map[string]string {
	if len(annotations) == 0 {
		return nil
	}
	out := make(map[string]string, len(annotations))
	data := struct {
		Labels map[string]string
		Value  float64
	}{labels, value}
	for k, v := range annotations {
		t, err := parseTemplate(k, v)
		var b bytes.Buffer
		if err == nil {
			err = t.Execute(&b, data)
		}
		if err != nil {
			out[k] = v + " (template error: " + strings.TrimSpace(err.Error()) + ")"
			continue
		}
		out[k] = b.String()
	}
	return out
}

// ValidateSet validates every rule and refuses duplicate names.
func ValidateSet(rules []Rule) error {
	seen := map[string]bool{}
	for i, r := range rules {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("rules[%d]: %w", i, err)
		}
		if seen[r.Name] {
			return fmt.Errorf("%w: rules[%d]: name %q is used twice", alerts.ErrInvalid, i, r.Name)
		}
		seen[r.Name] = true
	}
	return nil
}
