package manager

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/notify/alertmanager"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/alerts/silence"
	"governor.dev/governor/alerts/store"
	"governor.dev/governor/sdk/clock"
)

// amPost is one POST to the Alertmanager API, at the fake time it arrived.
type amPost struct {
	at time.Time
	as []alertmanager.PostableAlert
}

// amRecorder is an Alertmanager API recording the alerts posted.
type amRecorder struct {
	clk   *clock.Fake
	mu    sync.Mutex
	posts []amPost
}

func (r *amRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var as []alertmanager.PostableAlert
	_ = json.NewDecoder(req.Body).Decode(&as)
	r.mu.Lock()
	r.posts = append(r.posts, amPost{r.clk.Now(), as})
	r.mu.Unlock()
}

func (r *amRecorder) take() []amPost {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.posts
	r.posts = nil
	return out
}

// Alertmanager resolves an alert at its endsAt, or after its resolve_timeout
// (default 5m) when posted without one, unless it is posted again. The
// alertmanager receiver posts a P1 (repeat 1h) again every resend interval
// (1m) with an end 4 intervals ahead, so Alertmanager holds it firing all
// the time it fires; a silenced alert is not posted again (Alertmanager lets
// it end), and is again once the silence expires.
func TestAlertmanagerReceiverKeepsFiringAlertAlive(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	rec := &amRecorder{clk: clk}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	am, err := alertmanager.New(alertmanager.Config{URL: srv.URL}, srv.Client(), alertmanager.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "a.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	db := &metricsDB{series: map[string][]rule.Sample{}}
	m, err := New(ctx, Options{Rules: testRules, Query: db.query, Store: st, Clock: clk, Registerer: prometheus.NewRegistry(),
		Receivers: map[string]notify.Notifier{"am": am}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// steps steps every 15s from from to to; alive is until when
	// Alertmanager holds the alert firing, from what was posted; check
	// fails the test once that is past.
	var alive time.Time
	steps := func(from, to time.Duration, check bool) {
		t.Helper()
		for d := from; d <= to; d += 15 * time.Second {
			clk.Set(t0.Add(d))
			if err := m.Step(ctx, clk.Now()); err != nil {
				t.Fatal(err)
			}
			if err := m.Idle(ctx); err != nil {
				t.Fatal(err)
			}
			for _, p := range rec.take() {
				for _, a := range p.as {
					if a.EndsAt.IsZero() {
						t.Fatalf("at %s: alert posted without endsAt: Alertmanager resolves it after its resolve_timeout", p.at.Format(time.TimeOnly))
					}
					if a.EndsAt.After(alive) {
						alive = a.EndsAt
					}
				}
			}
			if check && !alive.IsZero() && clk.Now().After(alive) {
				t.Fatalf("at %s the firing alert ended in Alertmanager at %s", clk.Now().Format(time.TimeOnly), alive.Format(time.TimeOnly))
			}
		}
	}
	db.set("load", "checkout")
	steps(0, time.Hour, true)
	if alive.Sub(clk.Now()) > 4*time.Minute {
		t.Fatalf("alert held until %s, more than 4 resend intervals ahead", alive.Format(time.TimeOnly))
	}

	// Silenced for 10 minutes: no longer posted, Alertmanager lets it end.
	ms, err := alerts.ParseMatchers(`{alertname="Load"}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.AddSilence(ctx, silence.Silence{Matchers: ms, StartsAt: clk.Now(), EndsAt: clk.Now().Add(10 * time.Minute),
		CreatedBy: "ops", Comment: "maintenance"}); err != nil {
		t.Fatal(err)
	}
	steps(time.Hour+15*time.Second, time.Hour+9*time.Minute, false)
	if !clk.Now().After(alive) {
		t.Fatalf("silenced alert still held firing until %s", alive.Format(time.TimeOnly))
	}
	// The silence expires: posted again at once, and held from then on.
	alive = time.Time{}
	steps(time.Hour+10*time.Minute, time.Hour+11*time.Minute, false)
	steps(time.Hour+11*time.Minute+15*time.Second, time.Hour+30*time.Minute, true)
	if alive.IsZero() {
		t.Fatal("alert not posted again after its silence expired")
	}
}
