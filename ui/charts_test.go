package ui_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/model"
)

// windowCharts is a charts source with the optional window and class
// charts; it records the windows asked for.
type windowCharts struct {
	mu      sync.Mutex
	windows [][2]time.Time
	err     error
}

func (c *windowCharts) Charts(context.Context, string, time.Duration) ([]model.Chart, error) {
	return nil, c.err
}

func (c *windowCharts) Window(_ context.Context, _ string, start, end time.Time, names ...string) ([]model.Chart, error) {
	c.mu.Lock()
	c.windows = append(c.windows, [2]time.Time{start, end})
	c.mu.Unlock()
	out := make([]model.Chart, len(names))
	for i, n := range names {
		out[i] = model.Chart{Title: n, NoData: "the metrics source did not answer: it is unavailable"}
		if c.err == nil && n == model.SignalLoadScore {
			out[i] = model.Chart{Title: "Load score", Points: []model.Point{{At: end.Add(-time.Minute), Value: 0.74}, {At: end, Value: 0.86}}}
		}
	}
	return out, c.err
}

func (c *windowCharts) ServiceCharts(_ context.Context, svc string, span time.Duration) ([]model.SeriesChart, error) {
	if c.err != nil {
		return []model.SeriesChart{{Title: "Admitted by class", Unit: "req/s", NoData: "the metrics source did not answer: it is unavailable"}}, c.err
	}
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	pt := func(ago time.Duration, v float64) model.Point { return model.Point{At: t0.Add(-ago), Value: v} }
	return []model.SeriesChart{
		{Title: "Admitted by class", Unit: "req/s", Of: "Class", Series: []model.Series{
			{Name: "critical", Points: []model.Point{pt(time.Minute, 90), pt(0, 95)}},
			{Name: "batch", Points: []model.Point{pt(time.Minute, 20), pt(0, 4)}},
		}},
		{Title: "Shed by class (shed, rate limited, queue timeout)", Unit: "req/s", Of: "Class", Series: []model.Series{
			{Name: "critical", Points: []model.Point{pt(time.Minute, 0), pt(0, 0)}},
			{Name: "batch", Points: []model.Point{pt(time.Minute, 1), pt(0, 16)}},
		}},
		{Title: "Breaker states", Of: "Downstream", Min: 0, Max: 2, Levels: []string{"closed", "half-open", "open"}, Series: []model.Series{
			{Name: "payments", Points: []model.Point{pt(2*time.Minute, 0), pt(time.Minute, 2), pt(0, 1)}},
		}},
	}, nil
}

// seedEngineProposal proposes v3 of checkout as the engine, with the
// evidence the engine stores, on top of the seeded v1 (v2 is alice's).
func seedEngineProposal(t *testing.T, e *env, at time.Time) versioning.Version {
	t.Helper()
	ev := map[string]any{
		"at": at, "setpoint": 0.7, "load_score": 0.86,
		"terms": []map[string]any{
			{"term": "latency", "input": map[string]any{"value": 0.42, "status": "known"}, "target": 0.25, "normalized": 1, "weight": 0.3, "effectiveWeight": 0.5, "contribution": 0.5, "known": true},
			{"term": "cpu", "input": map[string]any{"value": 0.72, "status": "known"}, "target": 1, "normalized": 0.72, "weight": 0.3, "effectiveWeight": 0.5, "contribution": 0.36, "known": true},
		},
		"signals":         map[string]any{"request_rate": 180, "latency_p99": 0.42, "error_ratio": 0.015},
		"pid":             map[string]any{"mode": "auto", "setpoint": 0.7, "measurement": 0.86, "error": -0.16, "p": -32, "i": 200, "d": -8, "unlimited": 160, "output": 160},
		"detector":        map[string]any{"inconclusive": false, "healthy_intervals": 12, "intervals": 12, "baseline_p99": 0.12, "slow_call_threshold": 0.3},
		"ceiling":         map[string]any{"from": 200, "to": 160, "instances": 2, "routes": map[string]float64{"api": 160}, "per_instance": map[string]float64{"api": 80}},
		"expected_effect": "lower the ceiling from 200.0 to 160.0 req/s over 2 instances (api 80.0/s each)",
		"confidence":      0.9, "known_scores": 8,
		"auto_apply": false, "policy": "a change of 20.0% within the hour exceeds the band of 10.0%", "hour_reference": 200,
	}
	raw, err := json.Marshal(ev)
	require.NoError(t, err)
	v, err := e.store.Propose(context.Background(), versioning.Proposal{BaseVersion: 1, Ruleset: ruleset("checkout", 80), Source: versioning.SourceEngine,
		Author: versioning.Actor{Name: "engine", Roles: []versioning.Role{versioning.RoleOperator}}, Reason: "load score above the setpoint", Evidence: raw})
	require.NoError(t, err)
	return v
}

func get(t *testing.T, h http.Handler, sid, path string) (int, string) {
	t.Helper()
	r := httptest.NewRequest("GET", path, nil)
	r.AddCookie(&http.Cookie{Name: auth.CookieName, Value: sid})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

func TestRecommendationEvidenceForPeople(t *testing.T) {
	e := newEnv(t)
	e.seed()
	at := time.Date(2026, 3, 1, 8, 55, 0, 0, time.UTC)
	v := seedEngineProposal(t, e, at)
	charts := &windowCharts{}
	h, err := ui.New(ui.Options{Rules: e.store, Auth: e.auth, Fleet: e.fleet, Charts: charts, Clock: e.clk})
	require.NoError(t, err)
	sid, _ := e.session("bob")

	code, body := get(t, h, sid, "/recommendations")
	require.Equal(t, http.StatusOK, code)
	card := body[strings.Index(body, `<div class="card rec">`):]
	card = card[:strings.Index(card, "promo day")] // the engine's card is the newest, before alice's
	for _, want := range []string{
		`<a href="/recommendations/checkout/3">checkout v3</a> <span class="muted">engine`,
		`<dd class="effect">lower the ceiling from 200.0 to 160.0 req/s over 2 instances (api 80.0/s each)</dd>`,
		`<strong class="confidence">90 %</strong>`,
		"100 % of the load score&#39;s weight was known (latency, cpu)",
		`<strong class="verdict-no">waits for approval</strong>: a change of 20.0% within the hour exceeds the band of 10.0%`,
		`<td class="num">−32.0 req/s</td><td>lowers the ceiling</td>`,
		`<td class="num">&#43;200.0 req/s</td><td>raises the ceiling</td>`,
		`<td>P + I + D</td><td class="hide-narrow">the ceiling the controller asks for, before limits</td><td class="num">160.0 req/s</td>`,
		`<td class="num">200.0 req/s → 160.0 req/s</td><td><strong>−40.0 req/s (−20.0 %)</strong></td>`,
		`<code>routes[api].rate_limit.rate</code></td><td class="old"><code>100</code></td><td class="new"><code>80</code></td><td class="num">−20 (−20.0 %)</td>`,
		`Healthy baselines <strong class="detector-conclusive">conclusive</strong>`,
		"<title>2026-03-01 08:55:00 UTC: 0.86</title>", // the load score window
		"<title>setpoint 0.70</title>",
		"At the proposal: <strong>180 req/s</strong>",
		`<summary>Raw evidence (JSON)</summary>`,
		"Approve</button>",
	} {
		require.Contains(t, card, want)
	}
	require.Equal(t, 1, strings.Count(card, "<details"), "one collapsed block: the raw JSON")
	require.Equal(t, 4, strings.Count(card, `<svg class="chart"`), "load score, request rate, p99, error ratio")
	require.Contains(t, card, `class="pt s0 dot"`, "the evidence's single readings are visible")
	require.Equal(t, [2]time.Time{at.Add(-30 * time.Minute), at}, charts.windows[0], "the window before the proposal")
	require.Contains(t, body, `<summary>Evidence</summary>`, "a person's free-form evidence is still shown")

	code, page := get(t, h, sid, "/recommendations/checkout/3")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, page, "<h1>Recommendation for checkout v3</h1>")
	require.Contains(t, page, "lowers the ceiling")
	require.Contains(t, page, `action="/services/checkout/rules/3/approve"`)
	require.Nil(t, inlineScript.FindStringIndex(page))

	// A decided recommendation still shows its evidence, without the form.
	_, err = e.store.Reject(context.Background(), "checkout", v.Number, versioning.Actor{Name: "bob", Roles: roleUsers["bob"]}, "no")
	require.NoError(t, err)
	_, page = get(t, h, sid, "/recommendations/checkout/3")
	require.Contains(t, page, `<span class="state state-rejected">rejected</span>`)
	require.NotContains(t, page, "/rules/3/approve")
	require.Contains(t, page, "P + I + D")

	code, _ = get(t, h, sid, "/recommendations/checkout/99")
	require.Equal(t, http.StatusNotFound, code)
	code, _ = get(t, h, sid, "/recommendations/checkout/x")
	require.Equal(t, http.StatusBadRequest, code)

	// The metrics source down: the evidence's own readings, said so.
	charts.err = errors.New("refused")
	_, page = get(t, h, sid, "/recommendations/checkout/3")
	require.Contains(t, page, "the metrics source has no data for the window before it")
	require.Contains(t, page, "<title>2026-03-01 08:55:00 UTC: 0.86</title>")
}

func TestServiceTrafficByClassAndBreakers(t *testing.T) {
	e := newEnv(t)
	e.seed()
	for _, tc := range []struct {
		name string
		err  error
	}{{"ok", nil}, {"source down", errors.New("refused")}} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ui.New(ui.Options{Rules: e.store, Auth: e.auth, Fleet: e.fleet, Charts: &windowCharts{err: tc.err}, Clock: e.clk})
			require.NoError(t, err)
			sid, _ := e.session("vera")
			code, body := get(t, h, sid, "/services/checkout?range=15m")
			require.Equal(t, http.StatusOK, code)
			require.Contains(t, body, "Traffic by class and breakers over 15m")
			if tc.err != nil {
				require.Contains(t, body, "traffic by class and breaker charts are missing")
				require.Contains(t, body, "No data: the metrics source did not answer: it is unavailable")
				return
			}
			for _, want := range []string{
				`<h3>Admitted by class <span class="muted">(req/s)</span></h3>`,
				`<h3>Breaker states</h3>`,
				`<th>Class</th><th class="num">Now</th><th class="num">Lowest</th><th class="num">Highest</th>`,
				`<span class="swatch s1" aria-hidden="true"></span>batch</td><td class="num">16.00 req/s</td>`,
				`<title>batch · 2026-03-01 09:00:00 UTC: 16.00 req/s</title>`,
				`<span class="swatch s0" aria-hidden="true"></span>payments</td><td class="num">half-open</td><td class="num">open</td><td class="num">67 %</td>`,
				`>half-open</text>`,
			} {
				require.Contains(t, body, want)
			}
			require.NotContains(t, body, "charts are missing")
			require.Contains(t, body, "<title>2026-03-01 09:00:00 UTC: 0.86</title>", "the load score over the range, from the engine's gauge")
			require.Nil(t, inlineScript.FindStringIndex(body))
		})
	}
}

// TestManyRecommendationsNewestFirst: the recommendations are built a few
// at a time, each with its window, and still listed newest first.
func TestManyRecommendationsNewestFirst(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	alice := versioning.Actor{Name: "alice", Roles: roleUsers["alice"]}
	bob := versioning.Actor{Name: "bob", Roles: roleUsers["bob"]}
	const n = 9
	for i := range n {
		svc := "svc-" + string(rune('a'+i))
		v1, err := e.store.Propose(ctx, versioning.Proposal{Ruleset: ruleset(svc, 100), Author: alice, Reason: "first"})
		require.NoError(t, err)
		_, err = e.store.Approve(ctx, svc, v1.Number, bob, "ok")
		require.NoError(t, err)
		e.clk.Advance(time.Minute)
		_, err = e.store.Propose(ctx, versioning.Proposal{BaseVersion: 1, Ruleset: ruleset(svc, 80), Source: versioning.SourceEngine, Author: versioning.Actor{Name: "engine", Roles: []versioning.Role{versioning.RoleOperator}},
			Reason: "load", Evidence: []byte(`{"at":"2026-03-01T09:00:00Z","expected_effect":"lower ` + svc + `","ceiling":{"from":100,"to":80}}`)})
		require.NoError(t, err)
	}
	charts := &windowCharts{}
	h, err := ui.New(ui.Options{Rules: e.store, Auth: e.auth, Fleet: e.fleet, Charts: charts, Clock: e.clk})
	require.NoError(t, err)
	sid, _ := e.session("vera")
	code, body := get(t, h, sid, "/recommendations")
	require.Equal(t, http.StatusOK, code)
	last := len(body)
	for i := range n {
		at := strings.Index(body, `<dd class="effect">lower svc-`+string(rune('a'+i))+`</dd>`)
		require.Positive(t, at, "svc-%c", 'a'+i)
		require.Less(t, at, last, "newest first")
		last = at
	}
	require.Len(t, charts.windows, n, "one window per engine recommendation")
}
