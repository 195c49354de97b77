package ui_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/ui"
	"governor.dev/governor/ui/model"
)

// detailFleet is the static fleet plus what the engine knows of each
// service (model.Details).
type detailFleet struct {
	*model.StaticFleet
	detail map[string]model.ServiceDetail
	err    error
}

func (f detailFleet) ServiceDetail(_ context.Context, svc string) (model.ServiceDetail, error) {
	return f.detail[svc], f.err
}

// latencyCharts draws a p99 chart in ms and a request rate chart.
type latencyCharts struct{ at time.Time }

func (c latencyCharts) Charts(context.Context, string, time.Duration) ([]model.Chart, error) {
	pts := []model.Point{{At: c.at.Add(-2 * time.Minute), Value: 180}, {At: c.at.Add(-time.Minute), Value: 320}, {At: c.at, Value: 210}}
	return []model.Chart{{Title: "Request rate", Unit: "req/s", Points: pts}, {Title: "p99 latency", Unit: "ms", Points: pts}}, nil
}

// The service page draws the engine's p99 target on the p99 chart with its
// label and unit, and both the service page and the rules timeline warn of
// a version the relay cannot deliver.
func TestServicePageP99TargetAndUndeliverable(t *testing.T) {
	e := newEnv(t)
	e.seed()
	fleet := detailFleet{StaticFleet: e.fleet, detail: map[string]model.ServiceDetail{"checkout": {
		P99:           &model.LatencyLevels{Warn: 0.25, Critical: 0.5, Source: "learned"},
		Undeliverable: []model.Undeliverable{{Service: "checkout", Version: 2, Reason: "too_large", Size: 1_200_000, Limit: 1_000_000}},
	}}}
	h, err := ui.New(ui.Options{Rules: e.store, Auth: e.auth, Fleet: fleet, Charts: latencyCharts{at: e.clk.Now()}, Clock: e.clk})
	require.NoError(t, err)
	sid, _ := e.session("vera")

	code, body := get(t, h, sid, "/services/checkout")
	require.Equal(t, http.StatusOK, code)
	p99 := body[strings.Index(body, "<h3>p99 latency"):]
	p99 = p99[:strings.Index(p99, "</div>")]
	require.Contains(t, p99, `class="band-target"`, "the p99 chart draws the target line")
	require.Contains(t, p99, "<title>target 250 ms</title>")
	require.Contains(t, p99, "the warn level 250 ms (learned from the service&#39;s healthy baseline)")
	require.Contains(t, p99, "above the critical level 500 ms a P1")
	rate := body[strings.Index(body, "<h3>Request rate"):strings.Index(body, "<h3>p99 latency")]
	require.NotContains(t, rate, "band-target", "only the p99 chart has the target")
	require.Contains(t, body, "v2 cannot be delivered: 1.2 MB &gt; 1.0 MB max payload")

	code, body = get(t, h, sid, "/services/checkout/rules")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "v2 cannot be delivered: 1.2 MB &gt; 1.0 MB max payload")
	require.Contains(t, body, `<strong class="undeliverable">not delivered</strong>`)

	// A service without levels has no target line; an engine that does not
	// answer is a banner, not an error page.
	fleet.detail, fleet.err = nil, errors.New("engine down")
	h, err = ui.New(ui.Options{Rules: e.store, Auth: e.auth, Fleet: fleet, Charts: latencyCharts{at: e.clk.Now()}, Clock: e.clk})
	require.NoError(t, err)
	code, body = get(t, h, sid, "/services/checkout")
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, body, "band-target")
	require.Contains(t, body, "The engine did not answer: the p99 levels and delivery problems are not shown.")
	code, _ = get(t, h, sid, "/services/checkout/rules")
	require.Equal(t, http.StatusOK, code)
}

// A fleet that answers the services it could read with the error of what
// it could not (the engine's delivery ledger down) keeps the service page's
// live data, with a banner saying what is missing; before, the page dropped
// both and said the metrics source was unavailable.
func TestServicePageKeepsWhatAPartlyFailingFleetRead(t *testing.T) {
	e := newEnv(t)
	e.seed()
	score := 0.42
	e.fleet.Set([]model.ServiceStatus{{Name: "checkout", LoadScore: &score, Rollout: model.Rollout{Unknown: true}}},
		errors.New("engine: delivery ledger: connection refused"))
	h, err := ui.New(ui.Options{Rules: e.store, Auth: e.auth, Fleet: e.fleet, Clock: e.clk})
	require.NoError(t, err)
	sid, _ := e.session("vera")
	code, body := get(t, h, sid, "/services/checkout")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "Part of the live data could not be read: engine: delivery ledger: connection refused")
	require.NotContains(t, body, "The metrics source is unavailable")
	require.Contains(t, body, "0.42")
}
