package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/engine/config"
	"governor.dev/governor/engine/demo"
	"governor.dev/governor/engine/events"
	"governor.dev/governor/internal/testenv"
	"governor.dev/governor/rules/distribution"
	"governor.dev/governor/rules/versioning"
)

// testConfig is a dev stack on second-scale intervals: every proposal waits
// for a person (the band is manual), the guardrail judges within seconds.
func testConfig(t *testing.T) config.Config {
	cfg := config.DevDefaults()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	cfg.Identity = "e2e"
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
	cfg.Demo = config.Demo{Instances: 2, Period: 24 * time.Second}
	return cfg
}

// testServices is one service at half its capacity that loses two thirds
// of it from 16 s into every 24 s period.
func testServices() []demo.Service {
	return []demo.Service{{Name: "checkout", Capacity: 2, Work: 20 * time.Millisecond, Rate: 100,
		Incident: demo.CapacityDrop, Offset: 16 * time.Second, Factor: 4}}
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

var bob = versioning.Actor{Name: "bob", Roles: []versioning.Role{versioning.RoleApprover}}

func TestEndToEndEmbedded(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: about a minute")
	}
	scenario(t, testConfig(t))
}

func TestEndToEndPostgresNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: about a minute")
	}
	cfg := testConfig(t)
	cfg.Database = testenv.Postgres(t)
	cfg.NATS.URL = testenv.NATS(t)
	cfg.NATS.Prefix = fmt.Sprintf("e2e%d", time.Now().UnixNano())
	scenario(t, cfg)
}

// scenario: an incident leads to a proposal with evidence; a second user
// approves it, it is published and every instance ACKs; the load score
// returns below the setpoint; a bad version is rolled back by the
// guardrail; the audit chain verifies.
func scenario(t *testing.T, cfg config.Config) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := New(ctx, Options{Config: cfg, Logger: log, Registry: prometheus.NewRegistry(), DemoServices: testServices(),
		AlertInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	st := a.Store()
	const svc = "checkout"

	// 1. The incident leads to a proposal with evidence.
	var prop versioning.Version
	polls := 0
	waitFor(t, 60*time.Second, "an engine proposal", func() bool {
		if polls++; polls%6 == 0 {
			for _, r := range a.Evaluator().Recommendations() {
				t.Logf("recommendation: %s", r.Reason)
			}
			for _, s := range a.Evaluator().Scores() {
				t.Logf("score %s %.2f known %v: %s", s.Key.Service, s.Value, s.Known, s.Raw.Reason)
			}
		}
		vs, err := st.List(ctx, versioning.ListFilter{Service: svc, States: []versioning.State{versioning.StateProposed}})
		if err != nil || len(vs) == 0 || vs[0].Source != versioning.SourceEngine {
			return false
		}
		prop = vs[0]
		return true
	})
	var ev struct {
		LoadScore float64             `json:"load_score"`
		Signals   map[string]*float64 `json:"signals"`
		PID       struct {
			P, I, D, Output float64
		}
		Detector map[string]any `json:"detector"`
		Effect   string         `json:"expected_effect"`
		Conf     float64        `json:"confidence"`
		Ceiling  struct {
			From, To float64
		} `json:"ceiling"`
	}
	if err := json.Unmarshal(prop.Evidence, &ev); err != nil {
		t.Fatalf("evidence %s: %v", prop.Evidence, err)
	}
	if ev.Signals["request_rate"] == nil || ev.PID.Output <= 0 || ev.Detector == nil || ev.Effect == "" || ev.Conf <= 0 || ev.Ceiling.To <= 0 {
		t.Fatalf("incomplete evidence: %s", prop.Evidence)
	}
	t.Logf("proposal v%d: %s", prop.Number, prop.Reason)

	// 2. A second user approves it; it is published and every instance ACKs.
	var approved versioning.Version
	waitFor(t, 20*time.Second, "approval", func() bool {
		vs, err := st.List(ctx, versioning.ListFilter{Service: svc, States: []versioning.State{versioning.StateProposed}})
		if err != nil || len(vs) == 0 {
			return false
		}
		approved, err = st.Approve(ctx, svc, vs[0].Number, bob, "looks right")
		if errors.Is(err, versioning.ErrConflict) {
			_, _ = st.Rebase(ctx, svc, vs[0].Number, versioning.Actor{Name: "engine", Roles: []versioning.Role{versioning.RoleOperator}})
		}
		return err == nil
	})
	waitFor(t, 20*time.Second, "every instance ACKs", func() bool {
		ins, err := a.Ledger().Instances(ctx, svc)
		if err != nil || len(ins) != cfg.Demo.Instances {
			return false
		}
		for _, in := range ins {
			if in.AckVersion < approved.Number || in.State != distribution.StateSynced && in.Running < approved.Number {
				return false
			}
		}
		for _, v := range a.Fleet().Running() {
			if v < approved.Number {
				return false
			}
		}
		return true
	})
	if v, err := st.Get(ctx, svc, approved.Number); err != nil || v.PublishedAt.IsZero() && v.State != versioning.StateSuperseded {
		t.Fatalf("approved version not published: %+v %v", v, err)
	}

	// 3. The load score returns below the setpoint.
	waitFor(t, 40*time.Second, "load score below the setpoint", func() bool {
		for _, s := range a.Evaluator().Scores() {
			if s.Key.Service == svc && s.Known && s.Value < cfg.Recommend.Setpoint {
				return true
			}
		}
		return false
	})

	// 4. A bad version is rolled back by the guardrail.
	waitFor(t, 30*time.Second, "guardrail verdict on the approved version", func() bool { return !a.Guard().Watching(svc) })
	bad, err := a.PublishBadVersion(ctx, svc)
	if err != nil {
		t.Fatal(err)
	}
	var rolled versioning.Version
	waitFor(t, 30*time.Second, "automatic rollback", func() bool {
		if d := a.Guard().Decisions(); len(d) > 0 {
			t.Logf("guardrail: v%d %s: %s", d[0].Version, d[0].Verdict, d[0].Reason)
		}
		v, err := st.Active(ctx, svc)
		if err != nil || v.RollbackOf == 0 || v.Number <= bad.Number {
			return false
		}
		rolled = v
		return true
	})
	parent, err := st.Get(ctx, svc, bad.Parent)
	if err != nil {
		t.Fatal(err)
	}
	if rolled.RollbackOf != bad.Parent || rolled.Checksum != parent.Checksum || rolled.Author != "engine" {
		t.Fatalf("rollback v%d of v%d by %s, want of v%d by engine", rolled.Number, rolled.RollbackOf, rolled.Author, bad.Parent)
	}
	found := false
	for _, e := range a.Events().Events(events.AutoRollback) {
		found = found || e.Service == svc && e.Version == rolled.Number
	}
	if !found {
		t.Fatalf("no auto_rollback event: %+v", a.Events().Events(""))
	}
	t.Logf("rolled back: %s", rolled.Reason)
	// The rollback fires its alert.
	waitFor(t, 10*time.Second, "the GovernorAutoRollback alert", func() bool {
		for _, al := range a.Alerts().Alerts(time.Now()) {
			if al.Labels["alertname"] == "GovernorAutoRollback" && al.Labels["service"] == svc && al.EndsAt.IsZero() {
				return true
			}
		}
		return false
	})

	// The API shows it all.
	for _, path := range []string{"/engine/api/v1/services", "/engine/api/v1/recommendations", "/engine/api/v1/ledger", "/engine/api/v1/guardrails",
		"/engine/api/v1/services/checkout/versions", "/engine/api/v1/events", "/readyz", "/metrics"} {
		resp, err := http.Get("http://" + a.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s", path, resp.Status)
		}
	}

	// 5. The audit chain verifies.
	rep, err := st.VerifyAudit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("audit chain verified: %d entries", rep.Entries)

	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(20 * slack * time.Second):
		t.Fatal("engine did not stop within 20s")
	}
}

// waitFor polls cond every 500ms until it holds or the limit passes. The limit is
// a bound on a stuck test, not a timing claim: it is stretched by slack so a
// loaded CI machine running -race does not fail a stack that is merely slow.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	limit *= slack
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// slack stretches the real-time bounds of these end-to-end tests.
const slack = 3
