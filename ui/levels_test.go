package ui_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/ui"
	"governor.dev/governor/ui/model"
)

func fp(v float64) *float64 { return &v }

// The service page lists the alert levels in force per signal: each level,
// where it comes from (learned, the configured floor, the service's own),
// and the baseline behind learned ones with its sample count, or how far
// it is from conclusive.
func TestServicePageAlertLevels(t *testing.T) {
	e := newEnv(t)
	e.seed()
	fleet := detailFleet{StaticFleet: e.fleet, detail: map[string]model.ServiceDetail{
		"checkout": {Levels: []model.AlertLevel{
			{Signal: "latency_p99", InForce: true, Warn: fp(0.25), Critical: fp(0.3), Source: "learned", WarnFrom: "learned", CriticalFrom: "learned",
				Learned: true, Baseline: fp(0.2), Samples: 420, Needed: 100},
			{Signal: "error_ratio", InForce: true, Warn: fp(0.02), Critical: fp(0.05), Source: "learned", WarnFrom: "learned", CriticalFrom: "floor",
				Learned: true, Baseline: fp(0.012), Samples: 420, Needed: 100},
		}},
		"search": {Levels: []model.AlertLevel{
			{Signal: "latency_p99", Source: "learned", Learned: true, Samples: 42, Needed: 100},
			{Signal: "error_ratio", InForce: true, Warn: fp(0.001), Critical: fp(0.002), Source: "configured", WarnFrom: "override", CriticalFrom: "override"},
		}},
	}}
	h, err := ui.New(ui.Options{Rules: e.store, Auth: e.auth, Fleet: fleet, Clock: e.clk})
	require.NoError(t, err)
	sid, _ := e.session("vera")
	card := func(path string) string {
		t.Helper()
		code, body := get(t, h, sid, path)
		require.Equal(t, http.StatusOK, code)
		i := strings.Index(body, `id="alert-levels"`)
		require.GreaterOrEqual(t, i, 0, "no alert levels card on %s", path)
		return body[i : i+strings.Index(body[i:], "</table>")]
	}
	c := card("/services/checkout")
	require.Contains(t, c, "<tr><th>p99 latency</th><td class=\"num\">250 ms</td><td class=\"num\">300 ms</td><td>learned from the healthy baseline</td><td>200 ms over 420 healthy intervals</td></tr>")
	require.Contains(t, c, "<tr><th>error ratio</th><td class=\"num\">2.00 %</td><td class=\"num\">5.00 %</td><td>warn: learned from the healthy baseline; critical: the configured floor</td><td>1.20 % over 420 healthy intervals</td></tr>")
	s := card("/services/search")
	require.Contains(t, s, "<tr><th>p99 latency</th><td class=\"num\">none</td><td class=\"num\">none</td><td>none until the baseline is conclusive</td><td class=\"muted\">learning: 42 of 100 healthy intervals</td></tr>")
	require.Contains(t, s, "<td>the service&#39;s own levels</td><td>not learned</td>")

	// A fleet that does not read the engine shows no card.
	h, err = ui.New(ui.Options{Rules: e.store, Auth: e.auth, Fleet: e.fleet, Clock: e.clk})
	require.NoError(t, err)
	_, body := get(t, h, sid, "/services/checkout")
	require.NotContains(t, body, `id="alert-levels"`)
}
