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
	if len(pts) < 2 {
		return `<span class="muted">—</span>`
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
	// Act and Release draw the load score bands when above zero.
	Act, Release float64
}

const (
	chartW, chartH = 600, 200
	padL, padR     = 76, 10
	padT, padB     = 10, 28
)

// Chart draws an SVG line chart with axes, tick labels with units and the
// value of every point on hover (an SVG <title>, which also reaches screen
// readers). Points without times are spaced evenly.
func Chart(o ChartOptions) template.HTML {
	pts := o.Points
	if len(pts) == 0 {
		return `<p class="muted">No data for this range.</p>`
	}
	lo, hi := o.Min, o.Max
	if lo == 0 && hi == 0 {
		lo, hi = bounds(pts, []float64{o.Act, o.Release})
	}
	timed := !pts[0].At.IsZero()
	t0, t1 := pts[0].At, pts[len(pts)-1].At
	xOf := func(i int, p model.Point) float64 {
		w := float64(chartW - padL - padR)
		if timed && t1.After(t0) {
			return padL + float64(p.At.Sub(t0))/float64(t1.Sub(t0))*w
		}
		if len(pts) == 1 {
			return padL + w/2
		}
		return padL + float64(i)/float64(len(pts)-1)*w
	}
	yOf := func(v float64) float64 {
		return padT + (1-(v-lo)/(hi-lo))*float64(chartH-padT-padB)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="%s">`, chartW, chartH, template.HTMLEscapeString(o.Label))
	// Value axis with 5 ticks.
	for i := 0; i <= 4; i++ {
		v := lo + (hi-lo)*float64(i)/4
		y := yOf(v)
		fmt.Fprintf(&b, `<line class="grid" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>`, padL, chartW-padR, y, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`, padL-4, y+4, template.HTMLEscapeString(fmtValue(v, o.Unit)))
	}
	fmt.Fprintf(&b, `<line class="axis" x1="%d" x2="%d" y1="%d" y2="%d"/>`, padL, padL, padT, chartH-padB)
	fmt.Fprintf(&b, `<line class="axis" x1="%d" x2="%d" y1="%d" y2="%d"/>`, padL, chartW-padR, chartH-padB, chartH-padB)
	// Time axis: first, middle, last.
	if timed {
		for _, i := range []int{0, len(pts) / 2, len(pts) - 1} {
			anchor := "middle"
			if i == 0 {
				anchor = "start"
			} else if i == len(pts)-1 {
				anchor = "end"
			}
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="%s">%s</text>`, xOf(i, pts[i]), chartH-8, anchor, pts[i].At.UTC().Format(timeLayout(t1.Sub(t0))))
		}
	}
	for _, band := range []struct {
		v     float64
		class string
	}{{o.Act, "band-act"}, {o.Release, "band-release"}} {
		if band.v > 0 {
			y := yOf(band.v)
			fmt.Fprintf(&b, `<line class="%s" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>`, band.class, padL, chartW-padR, y, y)
		}
	}
	b.WriteString(`<polyline class="line" points="`)
	for i, p := range pts {
		fmt.Fprintf(&b, "%.1f,%.1f ", xOf(i, p), yOf(p.Value))
	}
	b.WriteString(`"/>`)
	for i, p := range pts {
		label := fmtValue(p.Value, o.Unit)
		if timed {
			label = p.At.UTC().Format("2006-01-02 15:04:05 UTC") + ": " + label
		}
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4"><title>%s</title></circle>`, xOf(i, p), yOf(p.Value), template.HTMLEscapeString(label))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
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
