package pages

import (
	"net/http/httptest"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/model"
)

func f64(v float64) *float64 { return &v }

func TestRowEscapesEverything(t *testing.T) {
	evil := `<img src=x onerror=alert(1)>`
	got := string(rowHTML(model.Row{ServiceStatus: model.ServiceStatus{Name: evil, ShedByClass: map[string]float64{evil: 0.5}}, ActiveVersion: 3, Pending: 1}))
	require.NotContains(t, got, "<img")
	require.Contains(t, got, "&lt;img src=x onerror=alert(1)&gt;")
	require.Contains(t, got, "not evaluated", "unknown values are not zeros")
}

func TestFormats(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{fmtSecs(f64(0.25)), "250 ms"},
		{fmtSecs(f64(1.5)), "1.50 s"},
		{fmtSecs(f64(0.0004)), "400 µs"},
		{fmtSecs(nil), "no data"},
		{fmtRate(f64(12)), "12.0 req/s"},
		{fmtRate(f64(2500)), "2.5k req/s"},
		{fmtPct(f64(0.012)), "1.20 %"},
		{fmtShed(map[string]float64{"sheddable": 0.1, "critical": 0}), "sheddable 10.0 %"},
		{fmtShed(map[string]float64{"sheddable": 0, "critical": 0}), "none"},
		{fmtShed(nil), "no data"},
		{fmtShed(map[string]float64{}), "no data"},
		{string(fmtRollout(model.Rollout{Synced: 37, Stale: 2, Nacked: 1})), `<span class="rollout-bad">37/40 SYNCED, 2 STALE, 1 NACKED</span>`},
		{string(fmtRollout(model.Rollout{Synced: 40})), "40/40 SYNCED"},
		{string(fmtScore(f64(0.85))), `<span class="score score-high">0.85</span>`},
	} {
		require.Equal(t, tc.want, tc.got)
	}
}

// TestUnknownRolloutIsUnknownNotNoInstances: a service whose delivery
// ledger was not read (it failed, or none is configured) reads "unknown"
// in the Rollout cell, never "no instances"; a ledger that was read and
// holds none still says "no instances".
func TestUnknownRolloutIsUnknownNotNoInstances(t *testing.T) {
	require.Equal(t, `<span class="muted">unknown</span>`, string(fmtRollout(model.Rollout{Unknown: true})))
	require.Equal(t, `<span class="muted">no instances</span>`, string(fmtRollout(model.Rollout{})))
	row := string(rowHTML(model.Row{ServiceStatus: model.ServiceStatus{Name: "checkout", Rollout: model.Rollout{Unknown: true}}}))
	require.Contains(t, row, `<span class="muted">unknown</span>`)
	require.NotContains(t, row, "no instances")
}

// TestUnknownShedIsNoDataNotNone: a service whose shed ratios the fleet
// does not know (the metrics did not answer, or no Enrich) reads "no
// data" in the overview's Shed cell, never "none", which claims it sheds
// nothing.
func TestUnknownShedIsNoDataNotNone(t *testing.T) {
	row := string(rowHTML(model.Row{ServiceStatus: model.ServiceStatus{Name: "checkout"}, Known: true}))
	require.Contains(t, row, `<td class="num hide-narrow" title="the metrics source has no samples of it for this service">no data</td><td><span class="muted">none</span>`, "shed cell, then the rules cell")
	require.NotContains(t, row, `<td class="num hide-narrow">none</td>`)
}

func TestDecisionWhy(t *testing.T) {
	pol := versioning.DefaultPolicy("s")
	proposed := versioning.Version{Service: "s", Number: 2, State: versioning.StateProposed, Author: "alice"}
	who := func(name string, roles ...versioning.Role) *auth.Principal {
		return &auth.Principal{User: auth.User{Name: name}, Roles: roles}
	}
	for _, tc := range []struct {
		name            string
		v               versioning.Version
		pol             versioning.Policy
		p               *auth.Principal
		approve, reject string
	}{
		{"approver may decide", proposed, pol, who("bob", versioning.RoleApprover), "", ""},
		{"author", proposed, pol, who("alice", versioning.RoleApprover), "four eyes", ""},
		{"author under another case", proposed, pol, who("Alice", versioning.RoleApprover), "four eyes", ""},
		{"already approved under another case", versioning.Version{State: versioning.StateProposed, Author: "alice", Approvals: []versioning.Approval{{Approver: "bob"}}},
			versioning.Policy{ApprovalsRequired: 2, ApproverRoles: pol.ApproverRoles}, who("BOB", versioning.RoleApprover), "already approved it", ""},
		{"operator", proposed, pol, who("otto", versioning.RoleOperator), "policy lets only", "policy lets only"},
		{"decided", versioning.Version{State: versioning.StateApproved}, pol, who("bob", versioning.RoleApprover), "approved, not awaiting", "approved, not awaiting"},
		{"already approved", versioning.Version{State: versioning.StateProposed, Author: "alice", Approvals: []versioning.Approval{{Approver: "bob"}}},
			versioning.Policy{ApprovalsRequired: 2, ApproverRoles: pol.ApproverRoles}, who("bob", versioning.RoleApprover), "already approved it; 1 of 2", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, r := DecisionWhy(tc.v, tc.pol, tc.p)
			check := func(got, want string) {
				if want == "" {
					require.Empty(t, got)
				} else {
					require.Contains(t, got, want)
				}
			}
			check(a, tc.approve)
			check(r, tc.reject)
		})
	}
}

func TestChartHasAxesUnitsAndHoverValues(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	svg := string(Chart(ChartOptions{Unit: "req/s", Label: "rate", Points: []model.Point{{At: t0, Value: 10}, {At: t0.Add(time.Minute), Value: 30}}}))
	require.Contains(t, svg, `class="axis"`)
	require.Contains(t, svg, "30.00 req/s", "ticks carry the unit")
	require.Contains(t, svg, "<title>2026-01-01 10:01:00 UTC: 30.00 req/s</title>", "values on hover")
	require.Contains(t, svg, ">10:00:00<", "time axis, seconds for short spans")
	require.Contains(t, string(Chart(ChartOptions{})), "No data")
	bands := string(Chart(ChartOptions{Points: []model.Point{{Value: 0.5}, {Value: 0.6}}, Min: 0, Max: 1, Act: 0.8, Release: 0.5}))
	require.Contains(t, bands, "band-act")
	require.Contains(t, bands, "band-release")
	require.True(t, strings.HasPrefix(string(Sparkline([]model.Point{{Value: 1}, {Value: 2}})), "<svg class=\"spark\""))
}

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{
		"/services/x":          "/services/x",
		"":                     "/",
		"//evil.example":       "/",
		"/\\evil.example":      "/",
		"https://evil.example": "/",
		"/a\r\nSet-Cookie":     "/",
		"/x/../\\evil.example": "/",
		"/\t/evil.example":     "/",
		"/a\\b":                "/",
		"/a?b=c%5Cd":           "/a?b=c%5Cd",
	} {
		require.Equal(t, want, safeNext(in), in)
	}
}

func FuzzSafeNext(f *testing.F) {
	for _, s := range []string{"/", "//x", "/\\x", "http://x", "/a?b=c", "/x/../\\x", "/\t/x", "/x/..//y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := safeNext(s)
		// What a browser makes of the Location http.Redirect writes: the
		// path cleaned, backslashes as slashes, tabs and newlines dropped.
		p, _, _ := strings.Cut(got, "?")
		p = strings.Map(func(r rune) rune {
			switch {
			case r == '\\':
				return '/'
			case r < 0x20 || r == 0x7f:
				return -1
			}
			return r
		}, path.Clean(p))
		if !strings.HasPrefix(got, "/") || strings.HasPrefix(p, "//") {
			t.Fatalf("safeNext(%q) = %q leaves the site (a browser reads %q)", s, got, p)
		}
	})
}

// TestEventDataLinesEndAtCROrLF: an SSE reader ends a line at CR, LF or
// CRLF, so every one of them in an event's data starts a new "data:" line;
// a bare CR (a proxy's error page quoted in the overview's banner) cut the
// line short and the rest was read as a field, not as data.
func TestEventDataLinesEndAtCROrLF(t *testing.T) {
	rec := httptest.NewRecorder()
	require.NoError(t, writeEvent(rec, "summary", "<div>502 Bad Gateway &lt;html&gt;\r</div>\r\nnext\rlast"))
	require.Equal(t, "event: summary\ndata: <div>502 Bad Gateway &lt;html&gt;\ndata: </div>\ndata: next\ndata: last\n\n", rec.Body.String())
}

// TestRolloutCountsUnpublishedInstancesApart: instances of a service no
// rule version was published for are UNPUBLISHED, never part of the
// SYNCED count, and the cell says what that means.
func TestRolloutCountsUnpublishedInstancesApart(t *testing.T) {
	got := string(fmtRollout(model.Rollout{Unpublished: 2}))
	require.Equal(t, `<span title="UNPUBLISHED: no rule version is published for these instances; they run the SDK defaults">0/2 SYNCED, 2 UNPUBLISHED</span>`, got)
	got = string(fmtRollout(model.Rollout{Synced: 1, Nacked: 1, Unpublished: 1}))
	require.Equal(t, `<span class="rollout-bad" title="UNPUBLISHED: no rule version is published for these instances; they run the SDK defaults">1/3 SYNCED, 1 NACKED, 1 UNPUBLISHED</span>`, got)
}
