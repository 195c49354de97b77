package ui_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/ui/demo"
)

// The demo's engine proposal is shown by the evidence view (the controller,
// the load score terms, the detector, the charts), not as raw JSON only.
func TestDemoRecommendationShowsTheEvidenceView(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, demo.Seed(context.Background(), demo.Options{Rules: e.store, Fleet: e.fleet, Alerts: e.alerts, Clock: e.clk, Services: 2}))
	sid, _ := e.session("bob")
	resp, body := e.do(req{method: "GET", path: "/recommendations/checkout/3", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	for _, want := range []string{
		`<dd class="effect">shed about 33% of the offered 21000 req/s`,
		`<strong class="confidence">80`,
		`<table class="pid">`, `<table class="terms">`, "Healthy baselines",
		"Load score before the proposal", "p99 latency before the proposal",
		"waits for approval", "exceeds the band of 10.0%",
	} {
		require.Contains(t, body, want)
	}
	require.Contains(t, body, "<svg", "the evidence charts are drawn")
	require.Contains(t, body, "Raw evidence (JSON)", "the raw JSON stays behind a disclosure")
}
