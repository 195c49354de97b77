package app

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

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
	lead.ready.Store(true) // what tick does after a cycle
	ready(lead)
	lead.ledgerDB.Close()
	unready(lead, "rules database")

	standby := rig(&notLeading{})
	unready(standby, "standby")
	standby.elector = &leader.Local{ID: "b"} // it takes the lead
	unready(standby, "no evaluation cycle has completed yet")
	standby.ready.Store(true)
	ready(standby)
	standby.nc.Close()
	unready(standby, "not connected to NATS")
}
