package ui_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	alertsapi "governor.dev/governor/alerts/api"
	"governor.dev/governor/alerts/manager"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/store"
	"governor.dev/governor/ui"
)

type dropAll struct{}

func (dropAll) Notify(context.Context, *notify.Message) (bool, error) { return false, nil }

// TestSilenceExpiryNamesTheVersionSeen: with an AlertService, the alerts
// page and the API share the silences' versions. Otto opens the alerts
// page; alice then extends the silence through the API (a new ETag);
// otto's expire form, of the version he saw, is refused with 409 saying
// alice edited it, and so is the API's DELETE with the old ETag; with the
// current ETag the silence ends.
func TestSilenceExpiryNamesTheVersionSeen(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ast, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "alerts.db"), store.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ast.Close() })
	m, err := manager.New(ctx, manager.Options{Store: ast, Clock: e.clk, Registerer: prometheus.NewRegistry(),
		Receivers: map[string]notify.Notifier{"none": dropAll{}}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	svc, err := alertsapi.New(m, alertsapi.Options{Clock: e.clk})
	require.NoError(t, err)
	h, err := ui.New(ui.Options{Rules: e.store, Auth: e.auth, Alerts: e.alerts, AlertService: svc, Clock: e.clk})
	require.NoError(t, err)
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)

	otto, ottoCSRF := e.session("otto")
	alice, aliceCSRF := e.session("alice")
	ends := func(d time.Duration) string { return e.clk.Now().Add(d).UTC().Format(time.RFC3339) }
	resp, body := e.do(req{method: "POST", path: "/api/v1/silences", session: otto, csrf: ottoCSRF,
		json: `{"matchers": "{service=\"checkout\"}", "ends_at": "` + ends(time.Hour) + `", "comment": "deploy"}`})
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	sils := svc.Silences(nil)
	require.Len(t, sils, 1)
	id, v1 := sils[0].ID, sils[0].Version
	require.Equal(t, `"`+v1+`"`, resp.Header.Get("ETag"))

	resp, body = e.do(req{method: "GET", path: "/alerts", session: otto})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `name="version" value="`+v1+`"`)

	e.clk.Advance(5 * time.Minute)
	resp, body = e.do(req{method: "POST", path: "/api/v1/silences", session: alice, csrf: aliceCSRF,
		json: `{"id": "` + id + `", "matchers": "{service=\"checkout\"}", "ends_at": "` + ends(8*time.Hour) + `", "comment": "all day"}`})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	v2 := svc.Silences(nil)[0].Version
	require.Equal(t, `"`+v2+`"`, resp.Header.Get("ETag"))

	resp, body = e.do(req{method: "POST", path: "/alerts/silences/" + id + "/expire", session: otto, csrf: ottoCSRF, form: url.Values{"version": {v1}}})
	require.Equal(t, http.StatusConflict, resp.StatusCode, body)
	require.Contains(t, body, "edited by alice")
	require.Contains(t, body, `name="version" value="`+v2+`"`)
	resp, body = e.do(req{method: "DELETE", path: "/api/v1/silences/" + id, session: otto, csrf: ottoCSRF, json: `{}`, header: map[string]string{"If-Match": `"` + v1 + `"`}})
	require.Equal(t, http.StatusConflict, resp.StatusCode, body)
	require.Equal(t, "active", string(svc.Silences(nil)[0].Status.State))

	resp, body = e.do(req{method: "DELETE", path: "/api/v1/silences/" + id, session: otto, csrf: ottoCSRF, json: `{}`, header: map[string]string{"If-Match": `"` + v2 + `"`}})
	require.Equal(t, http.StatusNoContent, resp.StatusCode, body)
	require.Equal(t, "expired", string(svc.Silences(nil)[0].Status.State))
}
