package app

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"governor.dev/governor/engine/config"
	"governor.dev/governor/engine/evaluate"
	"governor.dev/governor/engine/recommend"
)

// TestRecommendOptions: the configuration's defaults are the recommender's
// own, and every key reaches its option.
func TestRecommendOptions(t *testing.T) {
	if got, want := RecommendOptions(config.Default().Recommend), recommend.DefaultOptions(); !reflect.DeepEqual(got, want) {
		t.Fatalf("defaults differ:\nconfig    %+v\nrecommend %+v", got, want)
	}
	if got := config.Default().Recommend.OpenDeadband; got != recommend.DefaultOpenDeadband {
		t.Fatalf("recommend.open_deadband default %v, want %v", got, recommend.DefaultOpenDeadband)
	}
	r := config.Default().Recommend
	r.Deadband, r.MaxStepPerSecond, r.Binding = 0.02, 0.05, 0.8
	r.SlowCallMin, r.SlowCallMax, r.SlowCallDeadband, r.SlowCallFactor = 5*time.Millisecond, 10*time.Second, 0.3, 3
	r.HealthyErrorRatio, r.WarnSpreads, r.CriticalSpreads, r.BaselineSamples = 0.02, 3, 6, 10
	o := RecommendOptions(r)
	if o.Deadband != 0.02 || o.MaxStepPerSecond != 0.05 || o.Binding != 0.8 || o.SlowCallMin != 5*time.Millisecond ||
		o.SlowCallMax != 10*time.Second || o.SlowCallDeadband != 0.3 || o.Thresholds.SlowCallFactor != 3 ||
		o.Thresholds.HealthyErrorRatio != 0.02 || o.Thresholds.WarnSpreads != 3 || o.Thresholds.CriticalSpreads != 6 ||
		o.Thresholds.MinSamples != 10 {
		t.Fatalf("options %+v", o)
	}
	if _, err := recommend.New(o); err != nil {
		t.Fatal(err)
	}
}

// TestNewProposer: recommend.open_deadband and recommend.evidence_refresh
// reach the proposer; the default refresh is the proposer's own, 0 means
// every evaluation.
func TestNewProposer(t *testing.T) {
	r := config.Default().Recommend
	p := NewProposer(r, nil, nil)
	if p.EvidenceRefresh != recommend.DefaultEvidenceRefresh || p.OpenDeadband != recommend.DefaultOpenDeadband {
		t.Fatalf("defaults: refresh %s deadband %v", p.EvidenceRefresh, p.OpenDeadband)
	}
	r.EvidenceRefresh, r.OpenDeadband = 5*time.Minute, 0.2
	if p := NewProposer(r, nil, nil); p.EvidenceRefresh != 5*time.Minute || p.OpenDeadband != 0.2 {
		t.Fatalf("refresh %s deadband %v", p.EvidenceRefresh, p.OpenDeadband)
	}
	r.EvidenceRefresh = 0
	if p := NewProposer(r, nil, nil); p.EvidenceRefresh >= 0 {
		t.Fatalf("evidence_refresh 0: proposer refresh %s, want negative (every submission)", p.EvidenceRefresh)
	}
	if p.RollbackHold != recommend.DefaultRollbackHold {
		t.Fatalf("default rollback hold %s, want %s", p.RollbackHold, recommend.DefaultRollbackHold)
	}
	r.RollbackHold = 0
	if p := NewProposer(r, nil, nil); p.RollbackHold >= 0 {
		t.Fatalf("rollback_hold 0: proposer hold %s, want negative (no hold)", p.RollbackHold)
	}
}

// TestAlertLevels: the configuration's defaults are the evaluator's, and
// disabled means none.
func TestAlertLevels(t *testing.T) {
	got := AlertLevels(config.Default().AlertLevels)
	if want := evaluate.DefaultAlertLevels(); !reflect.DeepEqual(got, want) {
		t.Fatalf("defaults differ:\nconfig   %+v\nevaluate %+v", got, want)
	}
	c := config.Default().AlertLevels
	c.LatencyWarn, c.LatencyCritical = 300*time.Millisecond, time.Second
	if l := AlertLevels(c); l.LatencyWarn != c.LatencyWarn || l.LatencyCritical != c.LatencyCritical || l.Validate() != nil {
		t.Fatalf("levels %+v", l)
	}
	c.Services = map[string]config.ServiceLevels{"batch": {LatencyWarn: time.Second, LatencyCritical: 2 * time.Second, ErrorRatioWarn: 0.1, ErrorRatioCritical: 0.2},
		"legacy": {Disabled: true}}
	l := AlertLevels(c)
	if l.Services["batch"] != (evaluate.LevelOverride{LatencyWarn: time.Second, LatencyCritical: 2 * time.Second, ErrorWarn: 0.1, ErrorCritical: 0.2}) ||
		!l.Services["legacy"].Disabled || l.Validate() != nil {
		t.Fatalf("overrides %+v", l.Services)
	}
	c.Disabled = true
	if l := AlertLevels(c); l != nil {
		t.Fatalf("disabled: %+v", l)
	}
}

// TestAlertsConfigFile: New reads the alerting document of
// alerts.config_file and refuses a bad one before starting anything.
func TestAlertsConfigFile(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "alerts.json")
	if err := os.WriteFile(bad, []byte(`{"receivers": [{"name": "x", "webhook": {"url": "ftp://x/"}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.DevDefaults()
	cfg.DataDir, cfg.Listen = dir, "127.0.0.1:0"
	cfg.Alerts.ConfigFile = bad
	_, err := New(context.Background(), Options{Config: cfg})
	if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "alerts.config_file") || !strings.Contains(err.Error(), "receivers[0]") {
		t.Fatalf("New: %v", err)
	}
	cfg.Alerts.ConfigFile = filepath.Join(dir, "absent.json")
	if _, err := New(context.Background(), Options{Config: cfg}); err == nil || !strings.Contains(err.Error(), "alerts.config_file") {
		t.Fatalf("New with a missing file: %v", err)
	}
	if c, err := LoadAlerts(config.Alerts{}); c != nil || err != nil {
		t.Fatalf("no file: %v %v", c, err)
	}
}

// TestFailedStartNamesTheDependency: a start that fails once New has begun
// starting things (here NATS, on a port nothing listens on) returns an
// error naming the dependency and closes what it had opened; it used to
// panic in that cleanup, with the App it closes already set to nil.
func TestFailedStartNamesTheDependency(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close()
	cfg := config.DevDefaults()
	cfg.DataDir, cfg.Listen = t.TempDir(), "127.0.0.1:0"
	cfg.NATS.URL = "nats://" + dead
	a, err := New(context.Background(), Options{Config: cfg})
	if a != nil || err == nil || !strings.Contains(err.Error(), "nats") {
		t.Fatalf("New with NATS down = %v, %v; want no App and an error naming NATS", a, err)
	}
}

// TestFailedStartReleasesTheDemoFleet: a dev stack whose listen address is
// taken fails to start after its demo fleet was built, and stops the fleet
// with the rest: no governor, server or watcher of it is left running.
func TestFailedStartReleasesTheDemoFleet(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	before := goleak.IgnoreCurrent()
	cfg := config.DevDefaults()
	cfg.DataDir, cfg.Listen = t.TempDir(), busy.Addr().String()
	a, err := New(context.Background(), Options{Config: cfg, BcryptCost: 4})
	if a != nil || err == nil || !strings.Contains(err.Error(), "listen "+cfg.Listen) {
		t.Fatalf("New on a taken address = %v, %v; want no App and an error naming the address", a, err)
	}
	goleak.VerifyNone(t, before)
}

// TestStartOnATakenPortLeavesNoAdminWithAnUnseenPassword: a dev stack
// whose port is taken fails before creating the UI's first admin, so the
// next start creates it and its banner shows the one-time password. The
// address used to be bound last: the failed start had created the admin,
// whose password no banner ever showed, locking everyone out of the UI.
func TestStartOnATakenPortLeavesNoAdminWithAnUnseenPassword(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg := config.DevDefaults()
	cfg.DataDir, cfg.Listen = t.TempDir(), busy.Addr().String()
	if a, err := New(context.Background(), Options{Config: cfg, BcryptCost: 4}); a != nil || err == nil {
		t.Fatalf("New on a taken address = %v, %v; want no App and an error", a, err)
	}
	cfg.Listen = "127.0.0.1:0"
	a, err := New(context.Background(), Options{Config: cfg, BcryptCost: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	if !a.adminEnsured.Created || a.adminEnsured.Password == "" || !strings.Contains(a.adminEnsured.Banner(), a.adminEnsured.Password) {
		t.Fatalf("the start after one that failed on its port ensured %+v: no one-time password to show", a.adminEnsured)
	}
}

// TestLeaderOptions: leader.max_clock_skew reaches the Postgres elector.
func TestLeaderOptions(t *testing.T) {
	c := config.Default()
	c.Database, c.Identity = "postgres://db/governor", "replica-1"
	if o := LeaderOptions(c); o.MaxClockSkew != 10*time.Second || o.URL != c.Database || o.Identity != "replica-1" {
		t.Fatalf("defaults: %+v", o)
	}
	c.Leader.MaxClockSkew = 2 * time.Second
	if o := LeaderOptions(c); o.MaxClockSkew != 2*time.Second {
		t.Fatalf("leader.max_clock_skew 2s reached the elector as %s", o.MaxClockSkew)
	}
}

// TestConfiguredServicesTheEngineDoesNotKnowAreLogged: a well-formed
// service name in a per-service section that neither the signals nor the
// rules store know (a misspelling, most likely) is logged once by its
// field; known services are not.
func TestConfiguredServicesTheEngineDoesNotKnowAreLogged(t *testing.T) {
	var buf bytes.Buffer
	c := config.Default()
	c.Bands.Services = map[string]config.Band{"chekout": {Manual: true}, "search": {Manual: true}}
	c.AlertLevels.Services = map[string]config.ServiceLevels{"payments": {Disabled: true}}
	a := &App{cfg: c, log: slog.New(slog.NewTextHandler(&buf, nil))}
	a.warnUnknownServices(func(s string) bool { return s == "search" || s == "payments" })
	out := buf.String()
	if !strings.Contains(out, `field="bands.services[\"chekout\"]"`) || strings.Count(out, "\n") != 1 {
		t.Fatalf("log:\n%s\nwant one warning naming bands.services[\"chekout\"]", out)
	}
}
