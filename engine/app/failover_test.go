package app

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/engine/config"
	"governor.dev/governor/engine/events"
	"governor.dev/governor/internal/testenv"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/postgres"
	"governor.dev/governor/sdk/rules"
)

// TestFailover runs two engines on one database, stops the leader, and
// checks the standby leads within seconds and that every tick was evaluated
// exactly once; an emergency publication made at the leader change is
// reported once, by the new leader, and one made while no engine runs by
// the engine that starts next. (engine/leader's TestFailover kills the leader's database
// session instead, as a crashed process loses it.)
func TestFailover(t *testing.T) {
	url := testenv.Postgres(t)
	natsURL := testenv.NATS(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prefix := fmt.Sprintf("failover%d", time.Now().UnixNano())
	apps := map[string]*App{}
	regs := map[string]*prometheus.Registry{}
	done := map[string]chan error{}
	stop := map[string]context.CancelFunc{}
	for _, id := range []string{"a", "b"} {
		cfg := config.Default()
		cfg.Listen, cfg.DataDir, cfg.Identity = "127.0.0.1:0", t.TempDir(), id
		cfg.Database, cfg.NATS.URL, cfg.NATS.Prefix = url, natsURL, prefix
		cfg.Interval = 200 * time.Millisecond
		regs[id] = prometheus.NewRegistry()
		a, err := New(ctx, Options{Config: cfg, Registry: regs[id]})
		if err != nil {
			t.Fatal(err)
		}
		apps[id] = a
		actx, acancel := context.WithCancel(ctx)
		stop[id], done[id] = acancel, make(chan error, 1)
		go func() { done[id] <- a.Run(actx) }()
	}
	leaderOf := func(not string) string {
		for id, a := range apps {
			if id != not && a.Elector().IsLeader() {
				return id
			}
		}
		return ""
	}
	var first string
	waitFor(t, 10*time.Second, "a leader", func() bool { first = leaderOf(""); return first != "" })
	waitFor(t, 10*time.Second, "ticks by the first leader", func() bool {
		return ticks(t, regs[first]) >= 3
	})
	stop[first]()
	if err := <-done[first]; err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	standby := "a"
	if first == "a" {
		standby = "b"
	}
	// Published between the leader's end and the standby's first cycle.
	emergency(t, apps[standby].Store(), "pay")
	var second string
	waitFor(t, 10*time.Second, "the standby to lead", func() bool { second = leaderOf(first); return second != "" })
	t.Logf("%s leads %v after %s stopped", second, time.Since(killed).Round(time.Millisecond), first)
	waitFor(t, 10*time.Second, "ticks by the second leader", func() bool {
		return ticks(t, regs[second]) >= 3
	})
	waitFor(t, 10*time.Second, "the new leader to report the emergency", func() bool {
		return len(apps[second].Events().Events(events.EmergencyPublish)) == 1
	})
	stop[second]()
	if err := <-done[second]; err != nil {
		t.Fatal(err)
	}
	// Published while no engine runs: the next one reports it, and only it.
	st, err := postgres.Open(ctx, postgres.Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	emergency(t, st, "ship")
	st.Close()
	cfg := config.Default()
	cfg.Listen, cfg.DataDir, cfg.Identity = "127.0.0.1:0", t.TempDir(), "c"
	cfg.Database, cfg.NATS.URL, cfg.NATS.Prefix = url, natsURL, prefix
	cfg.Interval = 200 * time.Millisecond
	regC := prometheus.NewRegistry()
	c, err := New(ctx, Options{Config: cfg, Registry: regC})
	if err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithCancel(ctx)
	cdone := make(chan error, 1)
	go func() { cdone <- c.Run(cctx) }()
	waitFor(t, 10*time.Second, "ticks by the restarted engine", func() bool { return ticks(t, regC) >= 3 })
	ccancel()
	if err := <-cdone; err != nil {
		t.Fatal(err)
	}
	if got := c.Events().Events(events.EmergencyPublish); len(got) != 1 || got[0].Service != "ship" {
		t.Fatalf("restarted engine reported %+v, want ship alone", got)
	}
	if got := apps[second].Events().Events(events.EmergencyPublish); len(got) != 1 || got[0].Service != "pay" {
		t.Fatalf("new leader reported %+v, want pay alone", got)
	}
	if got := apps[first].Events().Events(events.EmergencyPublish); len(got) != 0 {
		t.Fatalf("old leader reported %+v", got)
	}
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	var rows, leaders int
	if err := admin.QueryRow(context.Background(), "SELECT count(*), count(DISTINCT leader) FROM governor_engine_ticks WHERE leader IN ('a', 'b')").Scan(&rows, &leaders); err != nil {
		t.Fatal(err)
	}
	evaluated := ticks(t, regs["a"]) + ticks(t, regs["b"])
	if float64(rows) != evaluated || leaders != 2 {
		t.Fatalf("%d ticks recorded by %d leaders, %v evaluated: a tick ran twice or was not recorded", rows, leaders, evaluated)
	}
}

// emergency publishes a ruleset for service in emergency mode.
func emergency(t *testing.T, st versioning.Store, service string) {
	t.Helper()
	rs := &rules.Ruleset{Service: service, Routes: []rules.Route{{Name: "api", Match: rules.Match{PathPrefix: "/"},
		RateLimit: &rules.RateLimit{Rate: 10}}}}
	root := versioning.Actor{Name: "root", Roles: []versioning.Role{versioning.RoleAdmin}}
	if _, err := st.EmergencyPublish(context.Background(), versioning.Proposal{Ruleset: rs, Author: root, Reason: "stop the bleeding", Rebase: true}); err != nil {
		t.Fatal(err)
	}
}

// ticks reads governor_engine_ticks_total from a registry.
func ticks(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "governor_engine_ticks_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}
