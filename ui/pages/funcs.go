package pages

import (
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/ui/model"
)

func (p *Pages) funcs() template.FuncMap {
	return template.FuncMap{
		"time":    p.fmtTime,
		"roles":   fmtRoles,
		"hasRole": func(rs []versioning.Role, r versioning.Role) bool { return slices.Contains(rs, r) },
		"tiers":   func() []model.Tier { return model.Tiers[:] },
		"score":   fmtScore,
		"pct":     fmtPct,
		"rate":    fmtRate,
		"secs":    fmtSecs,
		"shed":    fmtShed,
		"rollout": fmtRollout,
		"alerts":  fmtAlerts,
		"spark":   Sparkline,
		"row":     rowHTML,
		"yaml":    fmtYAML,
	}
}

func (p *Pages) fmtTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.In(p.o.Location).Format("2006-01-02 15:04:05 MST")
}

func fmtRoles(rs []versioning.Role) string {
	if len(rs) == 0 {
		return "no roles"
	}
	return versioning.JoinRoles(rs)
}

func known(v *float64) bool { return v != nil && !math.IsNaN(*v) && !math.IsInf(*v, 0) }

func fmtScore(v *float64) template.HTML {
	if !known(v) {
		return `<span class="muted">no data</span>`
	}
	class := ""
	switch {
	case *v >= 0.8:
		class = " score-high"
	case *v >= 0.5:
		class = " score-mid"
	}
	return template.HTML(fmt.Sprintf(`<span class="score%s">%.2f</span>`, class, *v))
}

func fmtPct(v *float64) string {
	if !known(v) {
		return "no data"
	}
	return fmt.Sprintf("%.2f %%", *v*100)
}

func fmtRate(v *float64) string {
	if !known(v) {
		return "no data"
	}
	if *v >= 1000 {
		return fmt.Sprintf("%.1fk req/s", *v/1000)
	}
	return fmt.Sprintf("%.1f req/s", *v)
}

func fmtSecs(v *float64) string {
	if !known(v) {
		return "no data"
	}
	switch {
	case *v >= 1:
		return fmt.Sprintf("%.2f s", *v)
	case *v >= 0.001:
		return fmt.Sprintf("%.0f ms", *v*1000)
	default:
		return fmt.Sprintf("%.0f µs", *v*1e6)
	}
}

// fmtShed lists the classes that shed; "none" only when every class is
// known not to shed. No class at all is no data (the metrics did not
// answer, or the fleet does not know the shed ratios), never "none".
func fmtShed(m map[string]float64) string {
	if len(m) == 0 {
		return "no data"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %.1f %%", k, m[k]*100))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// fmtRollout counts a service's instances by delivery state: "unknown"
// when the delivery ledger was not read (it failed, or none is
// configured), "no instances" only when it was and holds none. Instances
// no rule version is published for are counted as UNPUBLISHED, never as
// SYNCED, and the cell's title says what that means.
func fmtRollout(r model.Rollout) template.HTML {
	if r.Unknown {
		return `<span class="muted">unknown</span>`
	}
	total := r.Total()
	if total == 0 {
		return `<span class="muted">no instances</span>`
	}
	s := fmt.Sprintf("%d/%d SYNCED", r.Synced, total)
	for _, x := range []struct {
		n    int
		name string
	}{{r.Pending, "PENDING"}, {r.Stale, "STALE"}, {r.Nacked, "NACKED"}, {r.Gone, "GONE"}, {r.Unpublished, "UNPUBLISHED"}} {
		if x.n > 0 {
			s += fmt.Sprintf(", %d %s", x.n, x.name)
		}
	}
	var attrs string
	if r.Nacked > 0 || r.Stale > 0 {
		attrs += ` class="rollout-bad"`
	}
	if r.Unpublished > 0 {
		attrs += ` title="` + unpublishedTitle + `"`
	}
	if attrs == "" {
		return template.HTML(template.HTMLEscapeString(s))
	}
	return template.HTML(`<span` + attrs + `>` + template.HTMLEscapeString(s) + `</span>`)
}

// unpublishedTitle explains the UNPUBLISHED count of a rollout: those
// instances are not SYNCED on approved rules, none were published.
const unpublishedTitle = "UNPUBLISHED: no rule version is published for these instances; they run the SDK defaults"

func fmtAlerts(m map[model.Tier]int) template.HTML {
	var b strings.Builder
	for _, t := range model.Tiers {
		if n := m[t]; n > 0 {
			fmt.Fprintf(&b, `<span class="tier tier-%s">%s</span> %d `, t, t, n)
		}
	}
	if b.Len() == 0 {
		return `<span class="muted">none</span>`
	}
	return template.HTML(b.String())
}

func fmtYAML(r *rules.Ruleset) string {
	if r == nil {
		return ""
	}
	b, err := versioning.EncodeYAML(r)
	if err != nil {
		return "(cannot render: " + err.Error() + ")"
	}
	return string(b)
}

// evidenceHTML renders free-form evidence JSON: numeric series (arrays of
// numbers or of {at, value}) as charts, the rest as indented JSON.
func (p *Pages) evidenceHTML(raw json.RawMessage) template.HTML {
	if len(raw) == 0 {
		return ""
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return template.HTML(`<pre>` + template.HTMLEscapeString(string(raw)) + `</pre>`)
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	rest := map[string]json.RawMessage{}
	for _, k := range keys {
		var nums []float64
		if err := json.Unmarshal(obj[k], &nums); err == nil && len(nums) >= 2 {
			pts := make([]model.Point, len(nums))
			for i, v := range nums {
				pts[i] = model.Point{Value: v}
			}
			b.WriteString(`<div class="card"><h3>` + template.HTMLEscapeString(k) + `</h3>`)
			b.WriteString(string(Chart(ChartOptions{Points: pts, Unit: "", Label: k})))
			b.WriteString(`</div>`)
			continue
		}
		rest[k] = obj[k]
	}
	if len(rest) > 0 {
		pretty, _ := json.MarshalIndent(rest, "", "  ")
		b.WriteString(`<pre>` + template.HTMLEscapeString(string(pretty)) + `</pre>`)
	}
	return template.HTML(b.String())
}
