package pages

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/ui/model"
)

var st0 = time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)

func at(m int, v float64) model.Point {
	return model.Point{At: st0.Add(time.Duration(m) * time.Minute), Value: v}
}

func TestChartSinglePointHasAVisibleMarker(t *testing.T) {
	svg := string(Chart(ChartOptions{Unit: "req/s", Label: "rate", Points: []model.Point{at(0, 42)}}))
	require.NotContains(t, svg, "<polyline", "one point makes no line")
	require.Equal(t, 1, strings.Count(svg, `<circle class="pt s0 dot"`), "the lone point is drawn")
	require.Contains(t, svg, "<title>2026-01-01 10:00:00 UTC: 42.00 req/s</title>")
	require.Equal(t, 1, strings.Count(svg, ">10:00:00 UTC<"), "one time label for one instant, with its zone")
	// Untimed single points (evidence values) too.
	svg = string(Chart(ChartOptions{Points: []model.Point{{Value: 0.7}}, Min: 0, Max: 1}))
	require.Contains(t, svg, `class="pt s0 dot" cx="333.0"`, "in the middle")
}

func TestSparklineSinglePoint(t *testing.T) {
	require.Contains(t, string(Sparkline([]model.Point{{Value: 0.4}})), `<circle class="dot"`)
	require.Contains(t, string(Sparkline(nil)), "—")
}

func TestChartBreaksAtGapsAndMarksIsolatedPoints(t *testing.T) {
	// Samples every minute, a hole, one lone sample, a hole, two samples.
	pts := []model.Point{at(0, 1), at(1, 2), at(2, 3), at(10, 4), at(20, 5), at(21, 6)}
	svg := string(Chart(ChartOptions{Points: pts, Unit: "req"}))
	require.Equal(t, 2, strings.Count(svg, "<polyline"), "a line per run of samples")
	require.Equal(t, 1, strings.Count(svg, " dot\""), "only the sample between gaps is isolated")
	require.Contains(t, svg, "10:10:00 UTC: 4.00 req</title>")
	require.Equal(t, 6, strings.Count(svg, "<circle"), "every point has its value on hover")
	// Evenly spaced samples are one line, no markers.
	svg = string(Chart(ChartOptions{Points: []model.Point{at(0, 1), at(1, 2), at(2, 3)}}))
	require.Equal(t, 1, strings.Count(svg, "<polyline"))
	require.NotContains(t, svg, " dot\"")
}

func TestChartNoDataSaysWhy(t *testing.T) {
	require.Contains(t, string(Chart(ChartOptions{})), "No data for this range.")
	got := string(Chart(ChartOptions{NoData: `no samples of <x> for checkout`}))
	require.Contains(t, got, "No data: no samples of &lt;x&gt; for checkout")
	require.NotContains(t, got, "<svg")
}

func TestChartReferenceLines(t *testing.T) {
	svg := string(Chart(ChartOptions{Points: []model.Point{at(0, 0.6), at(1, 0.9)}, Min: 0, Max: 1, Act: 0.8, Release: 0.5, Setpoint: 0.7}))
	require.Contains(t, svg, `<line class="band-setpoint" x1="76" x2="590" y1="58.6" y2="58.6"><title>setpoint 0.70</title></line>`)
	require.Contains(t, svg, "<title>act above 0.80</title>")
	require.Contains(t, svg, "<title>release below 0.50</title>")
	svg = string(Chart(ChartOptions{Points: []model.Point{at(0, 120)}, Unit: "ms", Target: 250}))
	require.Contains(t, svg, "<title>target 250 ms</title>")
	require.Contains(t, svg, ">250 ms<", "the axis reaches the target")
}

func TestSeriesChart(t *testing.T) {
	c := model.SeriesChart{Title: "Admitted by class", Unit: "req/s", Series: []model.Series{
		{Name: "critical", Points: []model.Point{at(0, 100), at(1, 120)}},
		{Name: "core"},
		{Name: "<b>batch</b>", Points: []model.Point{at(0, 3), at(1, 1)}},
	}}
	out := string(SeriesChart(c, "admitted of checkout"))
	require.Contains(t, out, `aria-label="admitted of checkout"`)
	require.Contains(t, out, `<polyline class="line s0"`)
	require.Contains(t, out, `<polyline class="line s2"`)
	require.Contains(t, out, "<title>critical · 2026-01-01 10:01:00 UTC: 120 req/s</title>", "series, time and value on hover")
	require.Contains(t, out, `<table class="legend">`)
	require.Contains(t, out, `<tr><td><span class="swatch s0" aria-hidden="true"></span>critical</td><td class="num">120 req/s</td><td class="num">100 req/s</td><td class="num">120 req/s</td></tr>`,
		"legend: now, lowest, highest")
	require.Contains(t, out, `<span class="swatch s1" aria-hidden="true"></span>core</td><td class="num muted" colspan="3">no data</td>`)
	require.Contains(t, out, "&lt;b&gt;batch&lt;/b&gt;")
	require.NotContains(t, out, "<b>")
	require.Contains(t, out, ">0.00 req/s<", "value axis from zero with units")
	require.Contains(t, out, ">10:00:00<")
}

func TestSeriesChartStates(t *testing.T) {
	c := model.SeriesChart{Title: "Breaker states", Of: "Downstream", Min: 0, Max: 2, Levels: []string{"closed", "half-open", "open"}, Series: []model.Series{
		{Name: "payments", Points: []model.Point{at(0, 0), at(1, 2), at(2, 1), at(3, 0)}},
		{Name: "inventory", Points: []model.Point{at(2, 0)}},
	}}
	out := string(SeriesChart(c, "breakers"))
	for _, l := range []string{">closed<", ">half-open<", ">open<"} {
		require.Contains(t, out, l, "the axis names the states")
	}
	require.Contains(t, out, "<title>payments · 2026-01-01 10:01:00 UTC: open</title>")
	// A step line: each move is horizontal, then vertical.
	require.Contains(t, out, `<polyline class="line s0" points="76.0,172.0 247.3,172.0 247.3,10.0 `)
	require.Contains(t, out, `class="pt s1 dot"`, "the lone sample of inventory is visible")
	require.Contains(t, out, `<td><span class="swatch s0" aria-hidden="true"></span>payments</td><td class="num">closed</td><td class="num">open</td><td class="num">50 %</td>`,
		"legend: state now, worst state, share of samples not closed")
	require.Contains(t, out, `<th>Downstream</th><th class="num">Now</th><th class="num">Worst</th><th class="num">Not closed</th>`)

	empty := string(SeriesChart(model.SeriesChart{Title: "Breaker states", NoData: "no downstream breaker in checkout's metrics"}, "x"))
	require.Contains(t, empty, "No data: no downstream breaker in checkout&#39;s metrics")
	require.Contains(t, string(SeriesChart(model.SeriesChart{Series: []model.Series{{Name: "a"}}}, "x")), "none of the series has samples")
}

// BenchmarkCharts: one service page's worth of chart rendering, a line
// chart of 120 points and a chart of four classes of 120 points each.
func BenchmarkCharts(b *testing.B) {
	pts := make([]model.Point, 120)
	for i := range pts {
		pts[i] = model.Point{At: st0.Add(time.Duration(i) * 30 * time.Second), Value: float64(i % 17)}
	}
	sc := model.SeriesChart{Title: "Admitted by class", Unit: "req/s", Of: "Class"}
	for _, c := range []string{"critical", "core", "browse", "batch"} {
		sc.Series = append(sc.Series, model.Series{Name: c, Points: pts})
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if len(Chart(ChartOptions{Points: pts, Unit: "req/s", Label: "rate"})) == 0 || len(SeriesChart(sc, "admitted")) == 0 {
				b.Fatal("empty chart")
			}
		}
	})
}

// TestChartTimeAxisSaysUTC: a chart's time axis is in UTC, and its last
// label says so; "11:00" alone reads as local time to an SRE in another
// zone, an hour or more off the hover titles and the alert times.
func TestChartTimeAxisSaysUTC(t *testing.T) {
	svg := string(Chart(ChartOptions{Unit: "req/s", Points: []model.Point{at(0, 1), at(60, 2)}}))
	require.Contains(t, svg, `text-anchor="start">10:00</text>`)
	require.Contains(t, svg, `text-anchor="middle">10:30</text>`)
	require.Contains(t, svg, `text-anchor="end">11:00 UTC</text>`)
	days := string(SeriesChart(model.SeriesChart{Title: "admitted", Unit: "req/s", Series: []model.Series{
		{Name: "critical", Points: []model.Point{at(0, 1), at(3*24*60, 2)}}}}, "admitted of checkout"))
	require.Contains(t, days, `text-anchor="end">Jan 4 10:00 UTC</text>`)
}
