package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	alertspkg "governor.dev/governor/alerts"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/engine/app"
	"governor.dev/governor/engine/config"
	"governor.dev/governor/engine/demo"
	"governor.dev/governor/internal/testenv"
	"governor.dev/governor/rules/versioning"
)

// logWriter sends the app's warnings to the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// devConfig is the `make run` stack (embedded NATS, SQLite in a temp dir,
// the embedded metrics store, the demo fleet, the UI, alerts) on
// second-scale intervals, so that an incident becomes a recommendation
// within about half a minute. Every proposal waits for a person.
func devConfig(t *testing.T) config.Config {
	cfg := config.DevDefaults()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	cfg.Identity = "e2e-browser"
	cfg.Interval = time.Second
	cfg.Metrics.ScrapeInterval = 250 * time.Millisecond
	cfg.Metrics.Window = 3 * time.Second
	cfg.Score.HalfLife = 2 * time.Second
	cfg.Score.Latency = 100 * time.Millisecond
	cfg.Recommend.MinScores = 2
	cfg.Recommend.Setpoint = 0.5
	cfg.Recommend.BaselineSamples = 3
	cfg.Bands = config.Bands{Default: config.Band{Manual: true, MaxChangePerHour: 0.3}}
	cfg.Guardrail = config.Guardrail{Window: 6 * time.Second, Settle: 3 * time.Second, Step: 500 * time.Millisecond, MinSamples: 6,
		Alpha: 0.05, ErrorTolerance: 0.05, LatencyTolerance: 1, GoodputTolerance: 0.3}
	// The demo publishes a bad catalog version once; the guardrail's
	// rollback raises the P1 GovernorAutoRollback alert.
	cfg.Demo = config.Demo{Instances: 2, Period: 24 * time.Second, BadVersionAfter: 8 * time.Second}
	return cfg
}

// devServices: checkout at half its capacity loses three quarters of it
// from 8 s into every 24 s period (the incident the browser watches);
// catalog runs steadily so the guardrail can judge its bad version.
func devServices() []demo.Service {
	return []demo.Service{
		{Name: "checkout", Capacity: 2, Work: 20 * time.Millisecond, Rate: 100, Incident: demo.CapacityDrop, Offset: 8 * time.Second, Factor: 4},
		{Name: "catalog", Capacity: 4, Work: 10 * time.Millisecond, Rate: 150, Incident: demo.Spike, Factor: 1},
	}
}

// firingP1 reports the first firing P1 alert's name, or "".
func firingP1(a *app.App) string {
	for _, s := range a.Alerts().Alerts(time.Now()) {
		if s.Severity() == alertspkg.P1 && s.EndsAt.IsZero() {
			return s.Labels["alertname"]
		}
	}
	return ""
}

// TestBrowserDevStack walks the UI of the real dev stack (what `make run`
// starts, in this process): the first admin logs in with the one-time
// password from the banner and chooses a new one, creates an approver
// through the settings page, is refused removing their own admin role,
// watches the overview update live during the demo incident, opens the
// engine's recommendation and its evidence, sees self-approval refused on
// a proposal of their own; the approver logs in and approves the
// recommendation; the guardrail's final verdict on it is awaited (it may
// roll the version back by itself: checkout's incident recurs) and the
// ledger reaches SYNCED; the admin rolls back with the diff preview (to
// the version before, or over the guardrail's rollback to the approved
// one) and a reason, acknowledges a P1 alert, and finds the rollback with
// its reason and the approval in the audit log.
func TestBrowserDevStack(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: -short")
	}
	node := requireTools(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	banner := &testenv.Buffer{}
	log := slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelError}))
	a, err := app.New(ctx, app.Options{Config: devConfig(t), Stdout: banner, Logger: log, Registry: prometheus.NewRegistry(),
		DemoServices: devServices(), BcryptCost: bcrypt.MinCost, AlertInterval: time.Second})
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	stopped := false
	defer func() {
		if !stopped {
			cancel()
			<-errc
		}
	}()

	var password string
	waitUntil(t, 15*time.Second, "the banner with the one-time password", func() bool {
		m := regexp.MustCompile(`first admin "admin" with the one-time password: (\S+)`).FindStringSubmatch(banner.String())
		if m != nil {
			password = m[1]
		}
		return m != nil
	})

	// The P1 alert the admin acknowledges: the guardrail's rollback of the
	// demo's bad catalog version raises GovernorAutoRollback. Should it not
	// fire within 50 s, one is raised through the alerts manager the app
	// exposes (as if an emergency publication had happened), and the test
	// log says so.
	p1 := make(chan string, 1)
	watching := make(chan struct{})
	defer func() { cancel(); <-watching }()
	go func() {
		defer close(watching)
		deadline := time.Now().Add(50 * time.Second)
		for ctx.Err() == nil {
			if name := firingP1(a); name != "" {
				p1 <- name
				return
			}
			if time.Now().After(deadline) {
				err := a.Alerts().Observe(rule.Event{Kind: rule.EventEmergencyPublish, Service: "catalog", At: time.Now()})
				p1 <- "fallback: " + rule.EventEmergencyPublish + " observed by the test (" + errString(err) + ")"
				return
			}
			time.Sleep(250 * time.Millisecond)
		}
	}()

	shots, err := filepath.Abs(filepath.Join("screenshots", "devstack"))
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(shots)) // only this run's pictures
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	rctx, rcancel := context.WithTimeout(ctx, 3*time.Minute)
	defer rcancel()
	start := time.Now()
	cmd := exec.CommandContext(rctx, node, "devstack.mjs")
	cmd.Env = append(os.Environ(), "BASE_URL=http://"+a.Addr(), "ADMIN_PASSWORD="+password,
		"NEW_PASSWORD=e2e-"+hex.EncodeToString(b), "SCREENSHOTS="+shots, "CHROMIUM="+chromium)
	out, err := cmd.CombinedOutput()
	t.Logf("devstack.mjs (%v):\n%s", time.Since(start).Round(time.Second), out)
	select {
	case name := <-p1:
		t.Logf("P1 alert: %s", name)
	default:
	}
	require.NoError(t, err, "the browser walk-through failed")

	pngs, err := filepath.Glob(filepath.Join(shots, "*.png"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(pngs), 12)
	for _, p := range pngs {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		require.Greater(t, fi.Size(), int64(5000), "%s looks empty", p)
	}

	// What the browser did is in the store.
	st := a.Store()
	vs, err := st.List(ctx, versioning.ListFilter{Service: "checkout"})
	require.NoError(t, err)
	var engineApproved bool
	for _, v := range vs {
		if v.Source == versioning.SourceEngine && len(v.Approvals) > 0 && v.Approvals[0].Approver == "bob" {
			engineApproved = true
		}
	}
	require.True(t, engineApproved, "bob approved an engine recommendation")
	// The admin's rollback is the last word on checkout: nothing, the
	// guardrail included, replaced it after the walk-through saw it active.
	act, err := st.Active(ctx, "checkout")
	require.NoError(t, err)
	require.True(t, act.RollbackOf != 0 && act.Author == "admin", "admin's rollback of checkout is active, not v%d by %s", act.Number, act.Author)
	acked := false
	for _, s := range a.Alerts().Alerts(time.Now()) {
		acked = acked || s.Severity() == alertspkg.P1 && s.Acknowledged != nil && s.Acknowledged.By == "admin"
	}
	require.True(t, acked, "admin acknowledged a P1 alert")
	_, err = st.VerifyAudit(ctx)
	require.NoError(t, err)

	cancel()
	<-watching
	stopped = true
	select {
	case err := <-errc:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("the dev stack did not stop within 20s")
	}
}

func errString(err error) string {
	if err != nil {
		return err.Error()
	}
	return "ok"
}

// waitUntil polls cond every 200ms until it holds or the limit passes.
func waitUntil(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
