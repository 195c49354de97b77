package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	alerts "governor.dev/governor/alerts/manager"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/bcrypt"

	alertsconfig "governor.dev/governor/alerts/config"

	"governor.dev/governor/engine/api"
	"governor.dev/governor/engine/leader"
	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/recommend"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/internal/sqlitedb"
	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/distribution"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui"
	"governor.dev/governor/ui/auth"
)

type stubEval struct{}

func (stubEval) Scores() []loadscore.Score {
	return []loadscore.Score{{Key: signals.Key{Service: "checkout"}, Value: 0.8, Known: true}}
}
func (stubEval) Recommendations() []recommend.Recommendation {
	return []recommend.Recommendation{{Service: "checkout", Reason: "lower the ceiling"}}
}
func (stubEval) LastTick() time.Time { return time.Unix(100, 0) }

type stubLedger struct{}

func (stubLedger) Instances(context.Context, string) ([]distribution.Instance, error) {
	return []distribution.Instance{{Service: "checkout", Instance: "checkout-1", State: distribution.StateSynced}}, nil
}

// TestCombinedAPIIsAuthenticated serves the engine's read API and the web
// UI from one handler, as the dev engine does: every /api/v1 path, the UI's
// and the engine's former ones alike, refuses an anonymous request, while
// the engine's own endpoints stay under /engine/api/v1.
func TestCombinedAPIIsAuthenticated(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rules.db")
	st, err := sqlite.Open(ctx, sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	db, err := sqlitedb.Open(path, sqlitedb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := migrations.Up(ctx, db, migrations.SQLite); err != nil {
		t.Fatal(err)
	}
	am, err := auth.New(ctx, auth.Options{DB: db, Dialect: migrations.SQLite, Auditor: st, BcryptCost: bcrypt.MinCost})
	if err != nil {
		t.Fatal(err)
	}
	web, err := ui.New(ui.Options{Rules: st, Auth: am})
	if err != nil {
		t.Fatal(err)
	}
	engine := api.Handler(api.Options{Evaluations: stubEval{}, Versions: st, Ledger: stubLedger{}})
	h := combine(engine, web)

	get := func(path string) (int, string) {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		b, _ := io.ReadAll(rec.Result().Body)
		return rec.Code, string(b)
	}
	anonymous := []string{
		// The UI's read API.
		"/api/v1/overview", "/api/v1/services/checkout/versions", "/api/v1/services/checkout/versions/1",
		"/api/v1/services/checkout/diff?from=1&to=2", "/api/v1/alerts", "/api/v1/audit", "/api/v1/audit/verify", "/api/v1/silences",
		"/api/v1/services/checkout/canary",
		// Where the engine's unauthenticated API used to be.
		"/api/v1/services", "/api/v1/services/checkout", "/api/v1/recommendations", "/api/v1/ledger",
		"/api/v1/guardrails", "/api/v1/events",
	}
	for _, p := range anonymous {
		code, body := get(p)
		if code != http.StatusUnauthorized && code != http.StatusNotFound {
			t.Errorf("anonymous GET %s: %d, want 401 (or 404 for no such UI route)", p, code)
		}
		for _, leak := range []string{"checkout-1", "lower the ceiling", `"score"`} {
			if strings.Contains(body, leak) {
				t.Errorf("anonymous GET %s: engine data %q in %s", p, leak, body)
			}
		}
	}
	for _, p := range []string{"/api/v1/overview", "/api/v1/services/checkout/versions", "/api/v1/alerts", "/api/v1/audit"} {
		if code, _ := get(p); code != http.StatusUnauthorized {
			t.Errorf("anonymous GET %s: %d, want 401", p, code)
		}
	}
	for _, c := range []struct{ path, want string }{
		{api.Prefix + "/services", "checkout"},
		{api.Prefix + "/ledger", "checkout-1"},
		{"/healthz", "ok"},
		{"/login", "<form"},
	} {
		code, body := get(c.path)
		if code != http.StatusOK || !strings.Contains(body, c.want) {
			t.Errorf("GET %s: %d %q, want 200 with %q", c.path, code, body, c.want)
		}
	}
}

// TestStartAlerts: without a configuration the manager runs the built-in
// rules with the log receiver; a configuration brings its own rules and
// receivers, and an invalid one is refused before anything starts.
func TestStartAlerts(t *testing.T) {
	ctx := context.Background()
	db, err := sqlitedb.Open(filepath.Join(t.TempDir(), "rules.db"), sqlitedb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := migrations.Up(ctx, db, migrations.SQLite); err != nil {
		t.Fatal(err)
	}
	parse := func(s string) *alertsconfig.Config {
		c, err := alertsconfig.Parse([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	custom := parse(`{"builtin_rules": "disabled", "rules": [{"name": "Stale", "event": "instance_stale", "severity": "P1"}],
		"receivers": [{"name": "hook", "webhook": {"url": "http://127.0.0.1:9/hook"}}]}`)
	broken := parse(`{"receivers": [{"name": "hook", "webhook": {"url": "http://127.0.0.1:9/hook"}}]}`)
	broken.Receivers[0].Webhook.URL = "ftp://example.com/"
	for _, c := range []struct {
		name    string
		cfg     *alertsconfig.Config
		rules   []string
		wantErr string
	}{
		{"built-in", nil, []string{"GovernorLoadHigh", "GovernorInstanceStale", "GovernorInstanceNacked"}, ""},
		{"configured", custom, []string{"Stale"}, ""},
		{"invalid", broken, nil, "receivers[0]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := &App{o: Options{Alerts: c.cfg, Clock: clock.Real{}, Registry: prometheus.NewRegistry()},
				log: slog.New(slog.DiscardHandler), ledgerDB: db}
			err := a.startAlerts(ctx)
			defer a.close()
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			have := map[string]bool{}
			for _, r := range a.alerts.Rules() {
				have[r.Name] = true
			}
			for _, name := range c.rules {
				if !have[name] {
					t.Errorf("rule %s missing from %v", name, have)
				}
			}
			if c.cfg != nil && have["GovernorLoadHigh"] {
				t.Errorf("built-in rules run although disabled: %v", have)
			}
		})
	}
}

// leaseElector leads until the test ends its lead; the contexts it hands out
// end at once with it.
type leaseElector struct {
	leader.Local
	mu   sync.Mutex
	ends []context.CancelCauseFunc
}

func (e *leaseElector) LeaderContext(ctx context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancelCause(ctx)
	e.mu.Lock()
	e.ends = append(e.ends, cancel)
	e.mu.Unlock()
	return c, func() { cancel(context.Canceled) }
}

func (e *leaseElector) end(cause error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, f := range e.ends {
		f(cause)
	}
}

// TestAlertStepEndsWithTheLead: the alerts manager steps under the lead
// context, so a step in whose middle the lease runs out stops (its state
// writes and notifications fail) instead of notifying beside the next
// leader's step; a replica that does not lead does not step.
func TestAlertStepEndsWithTheLead(t *testing.T) {
	e := &leaseElector{}
	a := &App{o: Options{Clock: clock.NewFake(time.Unix(100, 0))}, log: slog.New(slog.DiscardHandler), elector: e}
	var cause error
	a.stepAlerts(context.Background(), stepFunc(func(ctx context.Context, _ time.Time) error {
		e.end(leader.ErrLeaseExpired)
		cause = context.Cause(ctx)
		return nil
	}))
	if !errors.Is(cause, leader.ErrLeaseExpired) {
		t.Fatalf("the alerts step went on after the lead ended: %v", cause)
	}
	// A replica that does not lead never makes its manager lead; it steps
	// it as a standby (which only reads what the others wrote).
	a.elector = &notLeading{}
	m := &standbyCounter{}
	a.stepAlerts(context.Background(), m)
	if m.leads != 0 || m.steps != 1 {
		t.Fatalf("a replica that does not lead: %d leads, %d steps; want 0 and 1 standby step", m.leads, m.steps)
	}
}

// standbyCounter counts the calls of stepAlerts; its Step answers as a
// standby's does.
type standbyCounter struct{ leads, steps int }

func (m *standbyCounter) Step(context.Context, time.Time) error {
	m.steps++
	return alerts.ErrStandby
}
func (m *standbyCounter) Follow(context.Context, time.Time) error {
	m.steps++
	return nil
}
func (m *standbyCounter) Lead(context.Context) error { m.leads++; return nil }
func (*standbyCounter) Standby()                     {}

// stepFunc is an alerts manager that only steps.
type stepFunc func(context.Context, time.Time) error

func (f stepFunc) Step(ctx context.Context, now time.Time) error   { return f(ctx, now) }
func (f stepFunc) Follow(ctx context.Context, now time.Time) error { return f(ctx, now) }
func (stepFunc) Lead(context.Context) error                        { return nil }
func (stepFunc) Standby()                                          {}

// notLeading is a replica that never leads.
type notLeading struct{ leader.Local }

func (*notLeading) IsLeader() bool { return false }

func (*notLeading) LeaderContext(ctx context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancelCause(ctx)
	cancel(leader.ErrNotLeader)
	return c, func() {}
}
