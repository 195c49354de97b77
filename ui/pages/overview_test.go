package pages

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
