package api

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/manager"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/alerts/silence"
	"governor.dev/governor/alerts/store"
)

type discard struct{}

func (discard) Notify(context.Context, *notify.Message) (bool, error) { return false, nil }

// A silence created through one replica since another last read the store
// can be edited and expired through the other one, at once.
func TestEditSilenceCreatedThroughAnotherReplica(t *testing.T) {
	ctx := context.Background()
	s, m, clk, path := setupAt(t, filepath.Join(t.TempDir(), "a.db"))
	// The other replica: a standby on the same database.
	st, err := store.OpenSQLite(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	b, err := manager.New(ctx, manager.Options{Rules: []rule.Rule{{Name: "Down", Event: "down", Severity: alerts.P1}},
		Store: st, Clock: clk, Registerer: prometheus.NewRegistry(), Receivers: map[string]notify.Notifier{"hook": discard{}},
		Standby: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	sb, err := New(b, Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	created, _, err := s.SaveSilence(ctx, SilenceRequest{Matchers: matchers(t, `service="checkout"`),
		EndsAt: t0.Add(time.Hour), CreatedBy: "ops", Comment: "deploy"})
	if err != nil {
		t.Fatal(err)
	}
	edited, isNew, err := sb.SaveSilence(ctx, SilenceRequest{ID: created.ID, Matchers: matchers(t, `service="checkout"`),
		EndsAt: t0.Add(2 * time.Hour), CreatedBy: "ops", Comment: "deploy, longer"})
	if err != nil {
		t.Fatalf("edit through the other replica: %v", err)
	}
	if isNew || edited.ID != created.ID {
		t.Fatalf("edit made %s (new %v), want %s edited in place", edited.ID, isNew, created.ID)
	}
	if err := m.Step(ctx, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	got := s.Silences(nil)
	if len(got) != 1 || !got[0].EndsAt.Equal(t0.Add(2*time.Hour)) || got[0].Comment != "deploy, longer" {
		t.Fatalf("the leader lists %+v, want the edit", got)
	}
	clk.Set(t0.Add(2 * time.Minute))
	if err := sb.ExpireSilence(ctx, created.ID); err != nil {
		t.Fatal(err)
	}
	if err := m.Step(ctx, clk.Now()); err != nil {
		t.Fatal(err)
	}
	if got := s.Silences([]silence.State{silence.StateExpired}); len(got) != 1 {
		t.Fatalf("the leader lists %+v as expired, want the silence", got)
	}
}
