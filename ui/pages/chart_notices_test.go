package pages

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/ui/model"
)

// noticeCharts answers the service page's charts: the p99 chart drawn from
// a partial answer, the error ratio's query failed, the load score's
// window failed, the class chart partial and empty, the breaker chart
// failed.
type noticeCharts struct{}

func (noticeCharts) Charts(_ context.Context, _ string, _ time.Duration) ([]model.Chart, error) {
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	return []model.Chart{
		{Title: "p99 latency", Unit: "ms", Points: []model.Point{{At: at.Add(-time.Minute), Value: 120}, {At: at, Value: 130}},
			Partial: "store eu-1 unavailable <script>"},
		{Title: "Error ratio", Unit: "%", Failed: "the metrics source did not answer: it took too long", NoData: "the metrics source did not answer: it took too long"},
		{Title: "Request rate", Unit: "req/s", NoData: "no samples of the request_rate signal for checkout in this range"},
	}, nil
}

func (noticeCharts) Window(_ context.Context, _ string, _, _ time.Time, names ...string) ([]model.Chart, error) {
	out := make([]model.Chart, len(names))
	for i := range names {
		out[i] = model.Chart{Title: "Load score", Failed: "the metrics source did not answer: it is unavailable"}
	}
	return out, nil
}

func (noticeCharts) ServiceCharts(context.Context, string, time.Duration) ([]model.SeriesChart, error) {
	return []model.SeriesChart{
		{Title: "Admitted by class", Unit: "req/s", Partial: "store us-2 unavailable", NoData: "no samples of governor_sdk_requests_total for checkout in this range"},
		{Title: "Breaker states", Failed: "the metrics source did not answer: it refused the query"},
	}, nil
}

// TestServicePageShowsPartialDataAndFailedQueriesOnTheirCharts: an SRE
// tells "the metrics store did not answer" from "no traffic" on each chart,
// and the rest of the page is drawn.
func TestServicePageShowsPartialDataAndFailedQueriesOnTheirCharts(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Charts = noticeCharts{} })
	id, _ := h.session("otto")
	resp, body := h.do(http.MethodGet, "/services/checkout", id, "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `<p class="banner banner-warn chart-notice" role="status">Partial data: store eu-1 unavailable &lt;script&gt;. Some series may be missing.</p>`)
	require.Contains(t, body, `<p class="banner banner-warn chart-notice" role="status">Query failed: the metrics source did not answer: it took too long.</p>`)
	require.Contains(t, body, `Query failed: the metrics source did not answer: it is unavailable.`, "the load score's failed window")
	require.Contains(t, body, `Partial data: store us-2 unavailable.`)
	require.Contains(t, body, `Query failed: the metrics source did not answer: it refused the query.`)
	require.Contains(t, body, `No data: no samples of the request_rate signal for checkout in this range`)
	require.NotContains(t, body, "No data: the metrics source did not answer", "a failure is not shown as no data")
	require.Equal(t, 1, strings.Count(body, "store eu-1"))
	require.Contains(t, body, `<svg class="chart"`, "the partial chart is still drawn")
}

func TestChartNoticesAreEscapedAndLeaveTheChart(t *testing.T) {
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	out := string(Chart(ChartOptions{Points: []model.Point{{At: at, Value: 1}}, Partial: `a"<b>`}))
	require.True(t, strings.HasPrefix(out, `<p class="banner banner-warn chart-notice" role="status">Partial data: a&#34;&lt;b&gt;. Some series may be missing.</p><svg`), out)
	out = string(Chart(ChartOptions{Failed: "x", NoData: "x"}))
	require.Equal(t, `<p class="banner banner-warn chart-notice" role="status">Query failed: x.</p>`, out)
}

// TestEvidenceChartsSayTheMetricsSourceFailedOrWasPartial: the charts of a
// recommendation say a failed or partial read of the window before it, also
// over the evidence's own reading.
func TestEvidenceChartsSayTheMetricsSourceFailedOrWasPartial(t *testing.T) {
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	e := engineEvidence{At: at, LoadScore: 0.9}
	failed := "the metrics source did not answer: it took too long"
	charts := []model.Chart{
		{Title: "Load score", Failed: failed, NoData: failed},
		{Title: "Request rate", Points: []model.Point{{At: at, Value: 5}}, Partial: "store eu-1 unavailable"},
		{Title: "p99 latency", Failed: failed, NoData: failed},
		{Title: "Error ratio"},
	}
	out, _ := evidenceCharts(e, charts, nil)
	require.Len(t, out, 4)
	require.Contains(t, string(out[0].SVG), "Query failed: "+failed+".")
	require.Contains(t, string(out[0].SVG), `<svg`, "the evidence's own reading is drawn")
	require.Contains(t, string(out[1].SVG), "Partial data: store eu-1 unavailable.")
	require.Contains(t, string(out[2].SVG), "Query failed: "+failed+".")
	require.Contains(t, string(out[2].SVG), "No data: the evidence has no reading of it")
	require.NotContains(t, string(out[2].SVG), "No data: the metrics source")
}
