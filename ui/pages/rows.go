package pages

import (
	"html/template"
	"strconv"
	"strings"

	"governor.dev/governor/ui/model"
)

// rowHTML renders one overview row. It is plain Go rather than a template
// because the overview renders a row per service (1,000 and more) every
// update, and per-cell template calls cost ten times as much; every
// variable string is escaped with template.HTMLEscapeString.
func rowHTML(r model.Row) template.HTML {
	var b strings.Builder
	b.Grow(1024)
	name := template.HTMLEscapeString(r.Name)
	b.WriteString(`<tr><td><a href="/services/`)
	b.WriteString(name)
	b.WriteString(`">`)
	b.WriteString(name)
	b.WriteString(`</a>`)
	if r.Overloaded {
		b.WriteString(` <strong class="score-high">overloaded</strong>`)
	}
	b.WriteString(`</td><td class="num">`)
	b.WriteString(string(fmtScore(r.LoadScore)))
	b.WriteString(`</td><td class="hide-narrow">`)
	b.WriteString(string(Sparkline(r.Trend)))
	b.WriteString(`</td><td class="num hide-narrow">`)
	b.WriteString(template.HTMLEscapeString(fmtRate(r.RequestRate)))
	b.WriteString(`</td><td class="num hide-narrow">`)
	b.WriteString(template.HTMLEscapeString(fmtPct(r.ErrorRatio)))
	b.WriteString(`</td><td class="num">`)
	b.WriteString(template.HTMLEscapeString(fmtSecs(r.P99)))
	b.WriteString(`</td><td class="num hide-narrow">`)
	b.WriteString(template.HTMLEscapeString(fmtShed(r.ShedByClass)))
	b.WriteString(`</td><td>`)
	if r.ActiveVersion > 0 {
		n := strconv.FormatInt(r.ActiveVersion, 10)
		b.WriteString(`<a href="/services/` + name + `/rules/` + n + `">v` + n + `</a>`)
	} else {
		b.WriteString(`<span class="muted">none</span>`)
	}
	if r.Pending > 0 {
		b.WriteString(` · <a href="/services/` + name + `/rules?state=proposed">` + strconv.Itoa(r.Pending) + ` open</a>`)
	}
	b.WriteString(`</td><td>`)
	b.WriteString(string(fmtRollout(r.Rollout)))
	b.WriteString(`</td><td>`)
	b.WriteString(string(fmtAlerts(r.Alerts)))
	b.WriteString("</td></tr>\n")
	return template.HTML(b.String())
}
