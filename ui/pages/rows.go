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
	b.WriteString(`</td>`)
	if known(r.LoadScore) {
		b.WriteString(`<td class="num">`)
		b.WriteString(string(fmtScore(r.LoadScore)))
		b.WriteString(`</td>`)
	} else {
		gapCell(&b, "num", r.Missing(model.SignalLoadScore), true)
	}
	b.WriteString(`<td class="hide-narrow">`)
	b.WriteString(string(Sparkline(r.Trend)))
	b.WriteString(`</td>`)
	valueCell(&b, "num hide-narrow", known(r.RequestRate), fmtRate(r.RequestRate), r, model.SignalRequestRate)
	valueCell(&b, "num hide-narrow", known(r.ErrorRatio), fmtPct(r.ErrorRatio), r, model.SignalErrorRatio)
	valueCell(&b, "num", known(r.P99), fmtSecs(r.P99), r, model.SignalLatencyP99)
	valueCell(&b, "num hide-narrow", len(r.ShedByClass) > 0, fmtShed(r.ShedByClass), r, model.SignalShedByClass)
	b.WriteString(`<td>`)
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

// valueCell writes an overview cell: the value text when known, else why
// it is missing.
func valueCell(b *strings.Builder, class string, ok bool, text string, r model.Row, signal string) {
	if !ok {
		gapCell(b, class, r.Missing(signal), false)
		return
	}
	b.WriteString(`<td class="`)
	b.WriteString(class)
	b.WriteString(`">`)
	b.WriteString(template.HTMLEscapeString(text))
	b.WriteString(`</td>`)
}

// gapCell writes the cell of a missing value: its short text, and why in
// the title (the tooltip).
func gapCell(b *strings.Builder, class string, g model.Gap, muted bool) {
	b.WriteString(`<td class="`)
	b.WriteString(class)
	b.WriteString(`" title="`)
	b.WriteString(template.HTMLEscapeString(g.Why))
	b.WriteString(`">`)
	if muted {
		b.WriteString(`<span class="muted">`)
	}
	b.WriteString(template.HTMLEscapeString(g.Text))
	if muted {
		b.WriteString(`</span>`)
	}
	b.WriteString(`</td>`)
}
