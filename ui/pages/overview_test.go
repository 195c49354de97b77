package pages

import (
	"bufio"
	"context"
	"net/http"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/model"
)

// TestOverviewLabelCarriesItsTimeForTheLiveScript: the overview says when
// its data was read, with the zone, and carries the same instant in
// RFC 3339 UTC (data-at) for assets/app.js, which shows "showing data as
// of … UTC" while the live stream is down, also when it never connected.
func TestOverviewLabelCarriesItsTimeForTheLiveScript(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	h := newHarness(t, func(o *Options) { o.Location = berlin })
	sid, _ := h.session("otto")
	resp, body := h.do("GET", "/", sid, "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `<span id="live" class="live" data-state="static" data-at="2026-03-01T09:00:00Z">as of 2026-03-01 10:00:00 CET</span>`)
}

// TestOverviewStreamEndsWhenTokenLosesItsRoles: a live overview stream
// opened with an API token ends once the token's user no longer holds any
// role its scopes name, as new requests with the token are refused then.
func TestOverviewStreamEndsWhenTokenLosesItsRoles(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	u, err := h.auth.User(ctx, "alice")
	require.NoError(t, err)
	tok, _, err := h.auth.CreateToken(ctx, &auth.Principal{User: u, Roles: u.Roles}, "alice", "wallboard", []versioning.Role{versioning.RoleApprover}, time.Hour)
	require.NoError(t, err)
	hr, err := http.NewRequest("GET", h.srv.URL+"/events/overview", nil)
	require.NoError(t, err)
	hr.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(hr)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	rd := bufio.NewReader(resp.Body)
	next := func() string {
		var event string
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return "closed"
			}
			line = strings.TrimRight(line, "\n")
			if line == "" {
				return event
			}
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				event = v
			}
		}
	}
	tick := func() {
		for h.clk.Pending() == 0 {
			runtime.Gosched()
		}
		h.clk.Advance(time.Minute)
	}
	require.Equal(t, "summary", next())
	require.Equal(t, "rows", next())
	require.NoError(t, h.auth.SetRoles(ctx, "alice", []versioning.Role{versioning.RoleOperator}))
	tick()
	require.Equal(t, "end", next(), "the token acts with no role any more")
	require.Equal(t, "closed", next())
}

// TestServicePageShowsInstancesWithNoVersionPublished: the service page
// lists an UNPUBLISHED instance with no target version ("none", not v0)
// and says that no rule version is published for it: that it runs the
// SDK defaults, or the version it says it runs all the same.
func TestServicePageShowsInstancesWithNoVersionPublished(t *testing.T) {
	fleet := &model.StaticFleet{}
	fleet.Set([]model.ServiceStatus{{Name: "checkout", Rollout: model.Rollout{Unpublished: 2}}}, nil)
	fleet.SetInstances("checkout", []model.Instance{
		{Name: "pod-a", State: "UNPUBLISHED"},
		{Name: "pod-b", State: "UNPUBLISHED", Running: 3},
	})
	h := newHarness(t, func(o *Options) { o.Fleet = fleet })
	sid, _ := h.session("otto")
	resp, body := h.do("GET", "/services/checkout", sid, "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `<tr><td>pod-a</td><td><strong>UNPUBLISHED</strong><br><span class="muted">no rule version published for it: runs the SDK defaults</span></td><td class="num">none</td><td class="num">none</td>`)
	require.Contains(t, body, `<tr><td>pod-b</td><td><strong>UNPUBLISHED</strong><br><span class="muted">runs v3, but no rule version is published for it</span></td><td class="num">v3</td><td class="num">none</td>`)
	// The page's CSRF tokens are random and may hold "v0" themselves.
	shown := regexp.MustCompile(`name="csrf" value="[^"]*"`).ReplaceAllString(body, "")
	require.NotContains(t, shown, "v0")
}

// TestOverviewCellsSayWhyAValueIsMissing: a missing value's cell says
// whether the service has no traffic, is not evaluated, or its value is
// unknown (the query failed), with why in its tooltip.
func TestOverviewCellsSayWhyAValueIsMissing(t *testing.T) {
	ctx := context.Background()
	fleet := &model.StaticFleet{}
	fleet.Set([]model.ServiceStatus{
		{Name: "checkout", LoadScore: f64(0.2), RequestRate: f64(0), ShedByClass: map[string]float64{"critical": 0}},
		{Name: "payments", LoadScore: f64(0.4), RequestRate: f64(12), ErrorRatio: f64(0.01), ShedByClass: map[string]float64{"critical": 0}},
	}, &model.SignalError{Signals: []model.SignalProblem{{Signal: "latency_p99", Failed: true, Reason: "the metrics source took too long"}}})
	alerts := model.NewMemoryAlerts(clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	alerts.Fire(model.Alert{ID: "a1", Tier: model.P2, Service: "billing", Summary: "x"})
	ov, err := model.Build(ctx, model.Sources{Fleet: fleet, Alerts: alerts})
	require.NoError(t, err)
	rows := map[string]string{}
	for _, r := range ov.Rows {
		rows[r.Name] = string(rowHTML(r))
	}

	require.Contains(t, rows["checkout"], `<td class="num hide-narrow" title="no requests in the window: nothing to measure">no traffic</td>`, "error ratio")
	require.Contains(t, rows["payments"], `<td class="num" title="the metrics query failed: the metrics source took too long">unknown</td>`, "p99")
	require.Contains(t, rows["billing"], `<td class="num" title="the engine does not evaluate this service: only its rules or alerts name it"><span class="muted">not evaluated</span></td>`, "load score")
	require.Contains(t, rows["billing"], `<td class="num hide-narrow" title="the engine does not evaluate this service: only its rules or alerts name it">not evaluated</td>`, "request rate")
}
