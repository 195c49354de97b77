package store_test

import (
	"context"
	"path/filepath"
	"testing"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/alerts/store"
	"governor.dev/governor/alerts/store/storetest"
	"governor.dev/governor/internal/testenv"
)

func TestSQLiteConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "alerts.db"), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestPostgresConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("PostgreSQL integration test")
	}
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := store.OpenPostgres(context.Background(), testenv.Postgres(t), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestSQLiteReopenKeepsStates: opening a migrated file again applies no
// migration twice and keeps what was stored.
func TestSQLiteReopenKeepsStates(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "alerts.db")
	a := rule.Active{Rule: "R", Labels: alerts.Labels{"alertname": "R"}, State: alerts.StateFiring}
	for i := range 3 {
		s, err := store.OpenSQLite(ctx, path, store.Options{})
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		if i == 0 {
			if err := s.SaveStates(ctx, []rule.Active{a}); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.LoadStates(ctx)
		_ = s.Close()
		if err != nil || len(got) != 1 || got[0].Rule != "R" {
			t.Fatalf("open %d: %+v %v", i, got, err)
		}
	}
}
