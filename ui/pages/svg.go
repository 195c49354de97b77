package pages

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"

	"governor.dev/governor/ui/model"
)

// Sparkline draws a small trend line (no axes) for the overview.
func Sparkline(pts []model.Point) template.HTML {
	switch len(pts) {
	case 0:
		return `<span class="muted" title="no trend yet">—</span>`
	case 1:
		// One reading so far: a dot at the right, where the latest goes.
		return `<svg class="spark" viewBox="0 0 100 24" preserveAspectRatio="none" role="img" aria-label="trend: one reading"><circle class="dot" cx="97" cy="12" r="3"/></svg>`
	}
	lo, hi := bounds(pts, nil)
	var b strings.Builder
	b.WriteString(`<svg class="spark" viewBox="0 0 100 24" preserveAspectRatio="none" role="img" aria-label="trend">`)
	b.WriteString(`<polyline points="`)
	buf := make([]byte, 0, 16)
	for i, p := range pts {
		x := float64(i) / float64(len(pts)-1) * 100
		y := 22 - (p.Value-lo)/(hi-lo)*20
		buf = strconv.AppendFloat(buf[:0], x, 'f', 1, 64)
		buf = append(buf, ',')
		buf = strconv.AppendFloat(buf, y, 'f', 1, 64)
		buf = append(buf, ' ')
		b.Write(buf)
	}
	b.WriteString(`"/></svg>`)
	return template.HTML(b.String())
}

// ChartOptions describe a line chart.
type ChartOptions struct {
	Points []model.Point
	// Unit is appended to values ("req/s", "s", ""); Label names the series.
	Unit, Label string
	// Min and Max fix the value axis (both zero: from the data).
	Min, Max float64
	// Act and Release draw the load score bands when above zero; Setpoint
	// the controller's setpoint.
	Act, Release, Setpoint float64
	// Target draws a target line (e.g. the p99 latency target) when above
	// zero.
	Target float64
	// NoData says why there are no points; default "No data for this range."
	NoData string
	// Failed says why the query failed; Partial is the metrics source's
	// warning that data may be missing (model.Chart). Each is shown as a
	// notice above the chart, a failure instead of NoData.
	Failed, Partial string
}

const (
	chartW, chartH = 600, 200
	padL, padR     = 76, 10
	padT, padB     = 10, 28
)

// noData is what an empty chart shows: the reason, when known.
func noData(reason string) template.HTML {
	if reason == "" {
		return `<p class="muted nodata">No data for this range.</p>`
	}
	return template.HTML(`<p class="muted nodata">No data: ` + template.HTMLEscapeString(reason) + `</p>`)
}

// notices say, above a chart, that its query failed or that the metrics
// source's answer may lack data, so a flat or empty line is not read as no
// traffic. With a failure, the chart's no-data line is left out: the
// notice says why.
func notices(b *strings.Builder, failed, partial string) {
	if failed != "" {
		b.WriteString(`<p class="banner banner-warn chart-notice" role="status">Query failed: ` + template.HTMLEscapeString(strings.TrimSuffix(failed, ".")) + `.</p>`)
	}
	if partial != "" {
		b.WriteString(`<p class="banner banner-warn chart-notice" role="status">Partial data: ` + template.HTMLEscapeString(strings.TrimSuffix(partial, ".")) + `. Some series may be missing.</p>`)
	}
}

// plot maps values and times to the chart's coordinates.
type plot struct {
	lo, hi float64
	t0, t1 time.Time
	timed  bool
}

func (pl plot) y(v float64) float64 {
	return padT + (1-(v-pl.lo)/(pl.hi-pl.lo))*float64(chartH-padT-padB)
}

// x places point i of n: by time when the chart is timed, else evenly; a
// lone point (or a chart of one instant) sits in the middle.
func (pl plot) x(i, n int, p model.Point) float64 {
	w := float64(chartW - padL - padR)
	switch {
	case pl.timed && pl.t1.After(pl.t0):
		return padL + float64(p.At.Sub(pl.t0))/float64(pl.t1.Sub(pl.t0))*w
	case pl.timed || n == 1:
		return padL + w/2
	}
	return padL + float64(i)/float64(n-1)*w
}

func (pl plot) frame(b *strings.Builder, label string) {
	fmt.Fprintf(b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="%s">`, chartW, chartH, template.HTMLEscapeString(label))
}

// valueAxis draws the grid and the value labels: five ticks, or one per
// level of a state chart.
func (pl plot) valueAxis(b *strings.Builder, unit string, levels []string) {
	tick := func(v float64, text string) {
		y := pl.y(v)
		fmt.Fprintf(b, `<line class="grid" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>`, padL, chartW-padR, y, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`, padL-4, y+4, template.HTMLEscapeString(text))
	}
	if len(levels) > 0 {
		for i, l := range levels {
			tick(float64(i), l)
		}
	} else {
		for i := 0; i <= 4; i++ {
			v := pl.lo + (pl.hi-pl.lo)*float64(i)/4
			tick(v, fmtValue(v, unit))
		}
	}
	fmt.Fprintf(b, `<line class="axis" x1="%d" x2="%d" y1="%d" y2="%d"/>`, padL, padL, padT, chartH-padB)
	fmt.Fprintf(b, `<line class="axis" x1="%d" x2="%d" y1="%d" y2="%d"/>`, padL, chartW-padR, chartH-padB, chartH-padB)
}

// timeAxis labels the first, middle and last instants, in UTC as every
// time the pages print; the last label says so, for a reader whose own
// zone is another.
func (pl plot) timeAxis(b *strings.Builder) {
	if !pl.timed {
		return
	}
	span := pl.t1.Sub(pl.t0)
	ticks := []time.Time{pl.t0, pl.t0.Add(span / 2), pl.t1}
	if span <= 0 {
		ticks = ticks[:1]
	}
	for i, t := range ticks {
		anchor := "middle"
		switch {
		case len(ticks) == 1:
		case i == 0:
			anchor = "start"
		case i == len(ticks)-1:
			anchor = "end"
		}
		label := t.UTC().Format(timeLayout(span))
		if i == len(ticks)-1 {
			label += " UTC"
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="%s">%s</text>`, pl.x(0, 1, model.Point{At: t}), chartH-8, anchor, label)
	}
}

// hline draws a horizontal reference line with its value on hover.
func (pl plot) hline(b *strings.Builder, v float64, class, title string) {
	y := pl.y(v)
	fmt.Fprintf(b, `<line class="%s" x1="%d" x2="%d" y1="%.1f" y2="%.1f"><title>%s</title></line>`, class, padL, chartW-padR, y, y, template.HTMLEscapeString(title))
}

// line draws one series: a polyline per run of points without a gap (a
// step line for state charts), a visible marker for every point that has
// no neighbour to join, and every point's value on hover.
func (pl plot) line(b *strings.Builder, pts []model.Point, class, name, unit string, levels []string, step bool) {
	n := len(pts)
	if n == 0 {
		return
	}
	gapAfter := gaps(pts, pl.timed)
	start := 0
	for i := range pts {
		if i < n-1 && !gapAfter[i] {
			continue
		}
		if i > start { // a run of two or more points
			fmt.Fprintf(b, `<polyline class="line %s" points="`, class)
			for j := start; j <= i; j++ {
				x, y := pl.x(j, n, pts[j]), pl.y(pts[j].Value)
				if step && j > start {
					fmt.Fprintf(b, "%.1f,%.1f ", x, pl.y(pts[j-1].Value))
				}
				fmt.Fprintf(b, "%.1f,%.1f ", x, y)
			}
			b.WriteString(`"/>`)
		}
		start = i + 1
	}
	for i, p := range pts {
		v := fmtValue(p.Value, unit)
		if len(levels) > 0 {
			v = levelName(p.Value, levels)
		}
		label := v
		if pl.timed {
			label = p.At.UTC().Format("2006-01-02 15:04:05 UTC") + ": " + v
		}
		if name != "" {
			label = name + " · " + label
		}
		dot := ""
		if (i == 0 || gapAfter[i-1]) && (i == n-1 || gapAfter[i]) {
			dot = " dot"
		}
		fmt.Fprintf(b, `<circle class="pt %s%s" cx="%.1f" cy="%.1f" r="4"><title>%s</title></circle>`, class, dot, pl.x(i, n, p), pl.y(p.Value), template.HTMLEscapeString(label))
	}
}

// gaps marks the points after which a timed series has a hole: a distance
// to the next point of more than twice the series' shortest step.
func gaps(pts []model.Point, timed bool) []bool {
	out := make([]bool, len(pts))
	if !timed || len(pts) < 3 {
		return out
	}
	var step time.Duration
	for i := 1; i < len(pts); i++ {
		if d := pts[i].At.Sub(pts[i-1].At); d > 0 && (step == 0 || d < step) {
			step = d
		}
	}
	for i := 1; i < len(pts); i++ {
		if pts[i].At.Sub(pts[i-1].At) > 2*step {
			out[i-1] = true
		}
	}
	return out
}

func levelName(v float64, levels []string) string {
	i := int(math.Round(v))
	if i >= 0 && i < len(levels) {
		return levels[i]
	}
	return fmtValue(v, "")
}

// Chart draws an SVG line chart with axes, tick labels with units and the
// value of every point on hover (an SVG <title>, which also reaches screen
// readers). Points without times are spaced evenly; a timed series breaks
// where samples are missing, and a point with no neighbour (a series of one)
// gets a visible marker. An empty chart says why; a failed query or a
// partial answer is said above the chart (o.Failed, o.Partial).
func Chart(o ChartOptions) template.HTML {
	pts := o.Points
	var b strings.Builder
	notices(&b, o.Failed, o.Partial)
	if len(pts) == 0 {
		if o.Failed == "" || (o.NoData != "" && o.NoData != o.Failed) {
			b.WriteString(string(noData(o.NoData)))
		}
		return template.HTML(b.String())
	}
	pl := plot{lo: o.Min, hi: o.Max, timed: !pts[0].At.IsZero(), t0: pts[0].At, t1: pts[len(pts)-1].At}
	if pl.lo == 0 && pl.hi == 0 {
		pl.lo, pl.hi = bounds(pts, []float64{o.Act, o.Release, o.Setpoint, o.Target})
	}
	pl.frame(&b, o.Label)
	pl.valueAxis(&b, o.Unit, nil)
	pl.timeAxis(&b)
	for _, ref := range []struct {
		v            float64
		class, title string
	}{
		{o.Act, "band-act", "act above " + fmtValue(o.Act, o.Unit)},
		{o.Release, "band-release", "release below " + fmtValue(o.Release, o.Unit)},
		{o.Setpoint, "band-setpoint", "setpoint " + fmtValue(o.Setpoint, o.Unit)},
		{o.Target, "band-target", "target " + fmtValue(o.Target, o.Unit)},
	} {
		if ref.v > 0 {
			pl.hline(&b, ref.v, ref.class, ref.title)
		}
	}
	pl.line(&b, pts, "s0", "", o.Unit, nil, false)
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// SeriesChart draws several series on shared axes (class colours s0…s5,
// cycling), a step line per series for state charts (Levels), values on
// hover, and under it a legend that is also the chart's text summary: each
// series' latest, lowest and highest value (for a state chart: its state
// now, its worst state and the share of samples not in the first state).
// label names the chart for screen readers.
func SeriesChart(c model.SeriesChart, label string) template.HTML {
	var all []model.Point
	for _, s := range c.Series {
		all = append(all, s.Points...)
	}
	var b strings.Builder
	notices(&b, c.Failed, c.Partial)
	if len(all) == 0 {
		if c.Failed != "" {
			return template.HTML(b.String())
		}
		why := c.NoData
		if why == "" && len(c.Series) > 0 {
			why = "none of the series has samples in this range"
		}
		b.WriteString(string(noData(why)))
		return template.HTML(b.String())
	}
	pl := plot{lo: c.Min, hi: c.Max, timed: !all[0].At.IsZero()}
	for i, p := range all {
		if i == 0 || p.At.Before(pl.t0) {
			pl.t0 = p.At
		}
		if i == 0 || p.At.After(pl.t1) {
			pl.t1 = p.At
		}
	}
	if pl.lo == 0 && pl.hi == 0 {
		pl.lo, pl.hi = bounds(all, nil)
	}
	pl.frame(&b, label)
	pl.valueAxis(&b, c.Unit, c.Levels)
	pl.timeAxis(&b)
	for i, s := range c.Series {
		pl.line(&b, s.Points, seriesClass(i), s.Name, c.Unit, c.Levels, len(c.Levels) > 0)
	}
	b.WriteString(`</svg>`)
	legend(&b, c)
	return template.HTML(b.String())
}

func seriesClass(i int) string { return "s" + strconv.Itoa(i%6) }

// legend writes the table under a series chart.
func legend(b *strings.Builder, c model.SeriesChart) {
	name := "Series"
	if c.Of != "" {
		name = c.Of
	}
	cols := []string{"Now", "Lowest", "Highest"}
	if len(c.Levels) > 0 {
		cols = []string{"Now", "Worst", "Not " + c.Levels[0]}
	}
	fmt.Fprintf(b, `<div class="tablewrap"><table class="legend"><thead><tr><th>%s</th><th class="num">%s</th><th class="num">%s</th><th class="num">%s</th></tr></thead><tbody>`,
		template.HTMLEscapeString(name), cols[0], cols[1], template.HTMLEscapeString(cols[2]))
	for i, s := range c.Series {
		fmt.Fprintf(b, `<tr><td><span class="swatch %s" aria-hidden="true"></span>%s</td>`, seriesClass(i), template.HTMLEscapeString(s.Name))
		if len(s.Points) == 0 {
			b.WriteString(`<td class="num muted" colspan="3">no data</td></tr>`)
			continue
		}
		lo, hi, off := math.Inf(1), math.Inf(-1), 0
		for _, p := range s.Points {
			lo, hi = math.Min(lo, p.Value), math.Max(hi, p.Value)
			if math.Round(p.Value) != 0 {
				off++
			}
		}
		last := s.Points[len(s.Points)-1].Value
		if len(c.Levels) > 0 {
			fmt.Fprintf(b, `<td class="num">%s</td><td class="num">%s</td><td class="num">%.0f %%</td></tr>`,
				template.HTMLEscapeString(levelName(last, c.Levels)), template.HTMLEscapeString(levelName(hi, c.Levels)), 100*float64(off)/float64(len(s.Points)))
			continue
		}
		fmt.Fprintf(b, `<td class="num">%s</td><td class="num">%s</td><td class="num">%s</td></tr>`,
			template.HTMLEscapeString(fmtValue(last, c.Unit)), template.HTMLEscapeString(fmtValue(lo, c.Unit)), template.HTMLEscapeString(fmtValue(hi, c.Unit)))
	}
	b.WriteString(`</tbody></table></div>`)
}

func timeLayout(span time.Duration) string {
	switch {
	case span > 36*time.Hour:
		return "Jan 2 15:04"
	case span < 10*time.Minute:
		return "15:04:05"
	}
	return "15:04"
}

func fmtValue(v float64, unit string) string {
	s := fmt.Sprintf("%.2f", v)
	if math.Abs(v) >= 100 {
		s = fmt.Sprintf("%.0f", v)
	}
	if unit == "" {
		return s
	}
	return s + " " + unit
}

// bounds returns a padded value range covering pts and extra values.
func bounds(pts []model.Point, extra []float64) (float64, float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range pts {
		lo, hi = math.Min(lo, p.Value), math.Max(hi, p.Value)
	}
	for _, e := range extra {
		if e > 0 {
			lo, hi = math.Min(lo, e), math.Max(hi, e)
		}
	}
	if lo > 0 {
		lo = 0
	}
	if hi <= lo {
		hi = lo + 1
	}
	return lo, hi
}
