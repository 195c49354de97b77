package app

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/engine/config"
	"governor.dev/governor/engine/leader"
	"governor.dev/governor/internal/sqlitedb"
	"governor.dev/governor/internal/testenv"
)

// TestReadinessFollowsTheDependencies: /readyz turns unready when NATS or
// the rules database stops answering after the engine was ready, and a
// replica that does not lead is not ready (its API would show no load
// scores) until it leads and has run a cycle.
func TestReadinessFollowsTheDependencies(t *testing.T) {
	rig := func(e leader.Elector) *App {
		nc, err := nats.Connect(testenv.NATS(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		db, err := sqlitedb.Open(filepath.Join(t.TempDir(), "g.db"), sqlitedb.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return &App{nc: nc, ledgerDB: db, elector: e}
	}
	unready := func(a *App, want string) {
		t.Helper()
		if err := a.readiness(); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("readiness = %v, want an error naming %q", err, want)
		}
	}
	ready := func(a *App) {
		t.Helper()
		if err := a.readiness(); err != nil {
			t.Fatalf("readiness = %v, want ready", err)
		}
	}

	lead := rig(&leader.Local{ID: "a"})
	unready(lead, "no evaluation cycle has completed yet")
	lead.cycleCompleted() // what tick does after a cycle
	ready(lead)
	lead.ledgerDB.Close()
	unready(lead, "rules database")

	standby := rig(&notLeading{})
	unready(standby, "standby")
	standby.elector = &leader.Local{ID: "b"} // it takes the lead
	unready(standby, "no evaluation cycle has completed yet")
	standby.cycleCompleted()
	ready(standby)
	standby.nc.Close()
	unready(standby, "not connected to NATS")

	// A cycle that completed as the lead ended (the lead in force already
	// over) does not count for the next lead.
	e := &termsElector{Local: leader.Local{ID: "c"}}
	late := rig(e)
	late.cycleCompleted()
	e.setLead(true)
	unready(late, "no evaluation cycle has completed yet")
	late.cycleCompleted()
	ready(late)
}

// termsElector leads while the test says so; the contexts of LeaderContext
// end (at once) when the lead they were made in does.
type termsElector struct {
	leader.Local
	mu    sync.Mutex
	leads bool
	ends  []context.CancelCauseFunc // of the lead in force
}

func (e *termsElector) setLead(on bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !on {
		for _, end := range e.ends {
			end(leader.ErrLeaseExpired)
		}
		e.ends = nil
	}
	e.leads = on
}

func (e *termsElector) IsLeader() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leads
}

func (e *termsElector) LeaderContext(ctx context.Context) (context.Context, context.CancelFunc) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c, cancel := context.WithCancelCause(ctx)
	if !e.leads {
		cancel(leader.ErrNotLeader)
		return c, func() {}
	}
	e.ends = append(e.ends, cancel)
	return c, func() { cancel(context.Canceled) }
}

// TestReplicaThatLeadsAgainIsNotReadyBeforeACycle: a leader that lost the
// lead and took it back serves the load scores it kept in memory from its
// last lead, possibly hours old, so /readyz says it is not ready until a
// cycle of the new lead completed (it used to say ready at once); a cycle
// whose lead ended midway does not count.
func TestReplicaThatLeadsAgainIsNotReadyBeforeACycle(t *testing.T) {
	ctx := context.Background()
	cfg := config.Default()
	cfg.Listen, cfg.DataDir, cfg.Identity = "127.0.0.1:0", t.TempDir(), "a"
	a, err := New(ctx, Options{Config: cfg, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	e := &termsElector{Local: leader.Local{ID: "a"}}
	a.elector = e
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	cycle := func(at time.Time) { // as leader.RunTicks runs one
		lctx, cancel := e.LeaderContext(ctx)
		defer cancel()
		a.tick(lctx, at)
	}
	check := func(when, want string) {
		t.Helper()
		err := a.readiness()
		switch {
		case want == "" && err != nil:
			t.Fatalf("%s: readiness = %v, want ready", when, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Fatalf("%s: readiness = %v, want an error naming %q", when, err, want)
		}
	}
	e.setLead(true)
	check("leading, before a cycle", "no evaluation cycle")
	cycle(t0)
	check("after a cycle", "")
	e.setLead(false)
	check("standby", "standby")
	e.setLead(true)
	check("leading again, before a cycle", "no evaluation cycle")
	ended, end := context.WithCancelCause(ctx)
	end(leader.ErrLeaseExpired)
	a.tick(ended, t0.Add(time.Hour))
	check("after a cycle whose lead ended midway", "no evaluation cycle")
	cycle(t0.Add(time.Hour + cfg.Interval))
	check("after a cycle of the new lead", "")
}
