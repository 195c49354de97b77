package manager

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/dispatch"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/store"
)

// Bad queue options are refused with the field named, before anything is
// loaded or started, instead of silently taking the defaults: a negative
// capacity would otherwise run with 256, a maximum back-off below the
// initial one with 1m.
func TestNewRefusesBadQueueOptions(t *testing.T) {
	st, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "alerts.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	tests := []struct {
		name  string
		queue notify.QueueOptions
		want  string
	}{
		{"negative capacity", notify.QueueOptions{Capacity: -1}, "queue: capacity: must not be negative, got -1"},
		{"negative attempts", notify.QueueOptions{MaxAttempts: -3}, "queue: max_attempts"},
		{"negative back-off", notify.QueueOptions{InitialBackoff: -time.Second}, "queue: initial_backoff"},
		{"negative timeout", notify.QueueOptions{Timeout: -time.Second}, "queue: timeout"},
		{"max back-off below the initial one", notify.QueueOptions{InitialBackoff: 2 * time.Minute, MaxBackoff: time.Minute},
			"queue: max_backoff: 1m0s is below initial_backoff 2m0s"},
		{"max back-off below the default initial one", notify.QueueOptions{MaxBackoff: time.Millisecond},
			"queue: max_backoff: 1ms is below initial_backoff 1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := New(context.Background(), Options{Store: st, Receivers: map[string]notify.Notifier{"x": discardNotifier{}},
				Queue: tt.queue})
			if err == nil {
				_ = m.Close()
			}
			if !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want an invalid-input error containing %q", err, tt.want)
			}
		})
	}
	m, err := New(context.Background(), Options{Store: st, Receivers: map[string]notify.Notifier{"x": discardNotifier{}},
		Queue: notify.QueueOptions{Capacity: 1024, InitialBackoff: 2 * time.Second, MaxBackoff: 2 * time.Second}})
	if err != nil {
		t.Fatalf("valid queue options refused: %v", err)
	}
	_ = m.Close()
}

// A negative SilenceRetention or DroppingFor is refused with the field
// named instead of silently taking the default.
func TestNewRefusesNegativeDurations(t *testing.T) {
	st, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "alerts.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	for _, tt := range []struct {
		o    Options
		want string
	}{
		{Options{SilenceRetention: -time.Hour}, "SilenceRetention: must not be negative"},
		{Options{DroppingFor: -time.Minute}, "DroppingFor: must not be negative"},
	} {
		tt.o.Store, tt.o.Receivers = st, map[string]notify.Notifier{"x": discardNotifier{}}
		m, err := New(context.Background(), tt.o)
		if err == nil {
			_ = m.Close()
		}
		if !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New: %v, want an invalid-input error containing %q", err, tt.want)
		}
	}
}

// A repeat interval below the group interval is accepted, as Alertmanager
// accepts it, and acts as the group interval (dispatch.Timing.Repeat); New
// and Reconfigure warn about it, naming the tier and both intervals.
func TestShortRepeatIntervalIsWarnedAbout(t *testing.T) {
	st, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "alerts.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	var logs bytes.Buffer
	receivers := map[string]notify.Notifier{"x": discardNotifier{}}
	m, err := New(context.Background(), Options{Store: st, Receivers: receivers,
		Timing: dispatch.Timing{GroupInterval: 10 * time.Minute}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	want := "repeat interval is below the group interval"
	if got := logs.String(); !strings.Contains(got, want) || !strings.Contains(got, "severity=P0 repeat=5m0s group_interval=10m0s") ||
		strings.Contains(got, "severity=P1") {
		t.Fatalf("New logged %q, want a warning about P0 only", got)
	}
	logs.Reset()
	if err := m.Reconfigure(Routing{Receivers: receivers}); err != nil {
		t.Fatal(err)
	}
	if got := logs.String(); strings.Contains(got, want) {
		t.Fatalf("default timing warned about: %q", got)
	}
	if err := m.Reconfigure(Routing{Receivers: receivers, Timing: dispatch.Timing{GroupInterval: 2 * time.Hour}}); err != nil {
		t.Fatal(err)
	}
	if got := logs.String(); !strings.Contains(got, "severity=P1 repeat=1h0m0s group_interval=2h0m0s") {
		t.Fatalf("Reconfigure logged %q, want a warning about P1", got)
	}
}
