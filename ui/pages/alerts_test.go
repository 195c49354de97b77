package pages

import (
	"context"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"governor.dev/governor/alerts"
	alertsapi "governor.dev/governor/alerts/api"
	"governor.dev/governor/alerts/manager"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/silence"
	"governor.dev/governor/alerts/store"
	"governor.dev/governor/ui/model"
)

// discard is a receiver that drops every message.
type discard struct{}

func (discard) Notify(context.Context, *notify.Message) (bool, error) { return false, nil }

// silenceHarness is the pages over a running alerts manager, with its
// silences by matchers (Options.AlertService).
func silenceHarness(t *testing.T) (*harness, *alertsapi.Service) {
	t.Helper()
	ctx := context.Background()
	ast, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "a.db"), store.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ast.Close() })
	var svc *alertsapi.Service
	h := newHarness(t, func(o *Options) {
		m, err := manager.New(ctx, manager.Options{Store: ast, Clock: o.Clock, Registerer: prometheus.NewRegistry(),
			Receivers: map[string]notify.Notifier{"none": discard{}}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = m.Close() })
		svc, err = alertsapi.New(m, alertsapi.Options{Clock: o.Clock})
		require.NoError(t, err)
		o.Alerts = model.NewMemoryAlerts(o.Clock)
		o.AlertService = svc
	})
	return h, svc
}

func activeSilences(t *testing.T, svc *alertsapi.Service) []string {
	t.Helper()
	var ids []string
	for _, s := range svc.Silences([]silence.State{silence.StateActive}) {
		ids = append(ids, s.ID)
	}
	return ids
}

// TestSilenceExpireFormRefusesAStaleVersion: the alerts page lists the
// active silences, each with an expire form carrying the version shown;
// one edited since (by someone else) is not expired by that form: 409,
// the page says who edited it and shows it as it is now, and the silence
// stays active; the form of the current version expires it. A form
// without a version, or with one that cannot be a version, is 400 and
// ends nothing; an unknown silence is 404 without the URL's text.
func TestSilenceExpireFormRefusesAStaleVersion(t *testing.T) {
	h, svc := silenceHarness(t)
	ctx := context.Background()
	now := h.clk.Now()
	ms, err := alerts.ParseMatchers(`{service="checkout"}`)
	require.NoError(t, err)
	s1, _, err := svc.SaveSilence(ctx, alertsapi.SilenceRequest{Matchers: ms, EndsAt: now.Add(time.Hour), CreatedBy: "alice", Comment: "deploy"})
	require.NoError(t, err)
	sess, csrf := h.session("otto")

	resp, body := h.do("GET", "/alerts", sess, "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `action="/alerts/silences/`+s1.ID+`/expire"`)
	require.Contains(t, body, `name="version" value="`+s1.Version+`"`)

	h.clk.Advance(10 * time.Minute)
	s2, _, err := svc.SaveSilence(ctx, alertsapi.SilenceRequest{ID: s1.ID, Matchers: ms, EndsAt: now.Add(4 * time.Hour), CreatedBy: "alice", Comment: "longer"})
	require.NoError(t, err)
	require.Equal(t, s1.ID, s2.ID)

	for _, v := range []url.Values{{}, {"version": {"<b>x</b>"}}} {
		resp, body = h.do("POST", "/alerts/silences/"+s1.ID+"/expire", sess, csrf, v)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
		require.NotContains(t, body, "<b>x</b>")
		require.NotContains(t, body, "&lt;b&gt;x")
		require.Equal(t, []string{s1.ID}, activeSilences(t, svc))
	}

	resp, body = h.do("POST", "/alerts/silences/"+s1.ID+"/expire", sess, csrf, url.Values{"version": {s1.Version}})
	require.Equal(t, http.StatusConflict, resp.StatusCode, body)
	require.Contains(t, body, "edited by alice at "+h.clk.Now().UTC().Format(time.RFC3339))
	require.Contains(t, body, `name="version" value="`+s2.Version+`"`, "the page shows the silence as it is now")
	require.Equal(t, []string{s1.ID}, activeSilences(t, svc), "a stale form ends nothing")

	resp, body = h.do("POST", "/alerts/silences/nosuchsilenceEVIL/expire", sess, csrf, url.Values{"version": {s2.Version}})
	require.Equal(t, http.StatusNotFound, resp.StatusCode, body)
	require.NotContains(t, body, "EVIL")
	require.Contains(t, body, "that silence does not exist")

	resp, body = h.do("POST", "/alerts/silences/"+s1.ID+"/expire", sess, csrf, url.Values{"version": {s2.Version}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	require.Equal(t, "/alerts", resp.Header.Get("Location"))
	require.Empty(t, activeSilences(t, svc))

	// A viewer sees no enabled expire button and may not post the form.
	h.clk.Advance(time.Minute)
	s3, _, err := svc.SaveSilence(ctx, alertsapi.SilenceRequest{Matchers: ms, EndsAt: h.clk.Now().Add(time.Hour), CreatedBy: "alice", Comment: "again"})
	require.NoError(t, err)
	bsess, bcsrf := h.session("bob")
	resp, _ = h.do("POST", "/alerts/silences/"+s3.ID+"/expire", bsess, bcsrf, url.Values{"version": {s3.Version}})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, []string{s3.ID}, activeSilences(t, svc))
}
