package app

import (
	"context"
	"testing"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/silence"
	"governor.dev/governor/alerts/store"
)

// TestStandbyStepsReadTheSilencesOtherReplicasMade: a standby's web UI and
// API list the silences of the alerts manager; one made through the leader
// (written to the shared store) must show on the standby within a step,
// not only once someone edits a silence there or it takes the lead.
func TestStandbyStepsReadTheSilencesOtherReplicasMade(t *testing.T) {
	ctx := context.Background()
	a, _, _ := alertsReplica(t, func(*App) {})
	st, err := store.New(ctx, a.ledgerDB, a.dialect(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := alerts.ParseMatchers(`alertname="High"`)
	if err != nil {
		t.Fatal(err)
	}
	now := a.o.Clock.Now()
	if err := st.PutSilence(ctx, silence.Silence{ID: "through-the-leader", Matchers: ms, StartsAt: now, EndsAt: now.Add(time.Hour),
		CreatedBy: "ops", Comment: "maintenance", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	a.stepAlerts(ctx, a.alerts)
	for _, s := range a.alerts.Silences() {
		if s.ID == "through-the-leader" {
			return
		}
	}
	t.Fatalf("the standby lists %v after a step, want the silence made through the leader", a.alerts.Silences())
}
