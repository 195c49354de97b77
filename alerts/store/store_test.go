package store_test

import (
	"context"
	"path/filepath"
	"testing"

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
