package store_test

import (
	"bytes"
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/alerts/silence"
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

// TestStoredSilenceThatNoLongerParsesIsSkipped: a silence stored by an older
// version with a matcher the current one refuses (a regex such as
// `x)|(.*` that escaped its anchors) must not make every silence unreadable,
// which would stop the alerts manager from starting or syncing: it is
// skipped, named in a warning, and the others load.
func TestStoredSilenceThatNoLongerParsesIsSkipped(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "alerts.db")
	var logs bytes.Buffer
	s, err := store.OpenSQLite(ctx, path, store.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	ms, err := alerts.ParseMatchers(`alertname="High"`)
	if err != nil {
		t.Fatal(err)
	}
	good := silence.Silence{ID: "good", Matchers: ms, StartsAt: now, EndsAt: now.Add(time.Hour), CreatedBy: "ops", Comment: "maintenance"}
	if err := s.PutSilence(ctx, good); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	body := `{"id":"old","matchers":"alertname=~\"x)|(.*\"","starts_at":"2026-01-01T00:00:00Z","ends_at":"2036-01-01T00:00:00Z","created_by":"ops","comment":"c"}`
	if _, err := db.ExecContext(ctx, `INSERT INTO alert_silences (id, starts_at, ends_at, created_by, comment, body) VALUES ('old', 0, 9000000000000000000, 'ops', 'c', ?)`, body); err != nil {
		t.Fatal(err)
	}
	got, err := s.Silences(ctx)
	if err != nil {
		t.Fatalf("Silences: %v, want the readable ones", err)
	}
	if len(got) != 1 || got[0].ID != "good" {
		t.Fatalf("Silences = %+v, want only the readable one", got)
	}
	if !strings.Contains(logs.String(), "old") {
		t.Fatalf("no warning names the skipped silence: %q", logs.String())
	}
}
