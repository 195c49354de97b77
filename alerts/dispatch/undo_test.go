package dispatch

import (
	"testing"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/notify"
)

// A resolve its receiver gave up on is sent again at the group interval
// after it, with the end it had, also when the group was forgotten
// meanwhile (nothing else in it): the incident it closes does not stay open.
func TestUndoneResolveIsSentAgainAtGroupInterval(t *testing.T) {
	d := newDispatcher(t)
	a := alert("Shed", "checkout", alerts.P0, t0)
	d.Flush(t0, []alerts.Alert{a}, Filter{})
	d.Flush(t0.Add(30*time.Second), []alerts.Alert{a}, Filter{})
	ns := d.Flush(t0.Add(3*time.Minute), nil, Filter{})
	if describe(ns) != "team:resolved:0f1r" || len(d.States()) != 0 {
		t.Fatalf("resolve %q, groups %+v", describe(ns), d.States())
	}
	d.TakeChanges()
	d.Undo(ns[0].Message)
	if changed, _ := d.TakeChanges(); len(changed) != 1 {
		t.Fatalf("the group formed again is not reported for the store: %v", changed)
	}
	if ns := d.Flush(t0.Add(4*time.Minute), nil, Filter{}); len(ns) != 0 {
		t.Fatalf("resolve sent again before the group interval: %q", describe(ns))
	}
	ns = d.Flush(t0.Add(5*time.Minute), nil, Filter{}) // 3m + group interval
	if describe(ns) != "team:resolved:0f1r" || !ns[0].Message.Alerts[0].EndsAt.Equal(t0.Add(3*time.Minute)) {
		t.Fatalf("resolve sent again: %q %+v, want it ended at 3m", describe(ns), ns)
	}
	if len(d.States()) != 0 {
		t.Fatalf("group kept after the resolve went out: %+v", d.States())
	}
}

// A first page its receiver gave up on is due again at the group interval
// after it, not at the next flush, as Alertmanager retries at the group's
// next flush.
func TestUndoneFirstPageWaitsForGroupInterval(t *testing.T) {
	d := newDispatcher(t)
	a := alert("Shed", "checkout", alerts.P0, t0)
	d.Flush(t0, []alerts.Alert{a}, Filter{})
	ns := d.Flush(t0.Add(30*time.Second), []alerts.Alert{a}, Filter{})
	if describe(ns) != "team:firing:1f0r" {
		t.Fatalf("first page %q", describe(ns))
	}
	d.Undo(ns[0].Message)
	run(t, d, Filter{}, []step{
		{time.Minute, []alerts.Alert{a}, ""},
		{150 * time.Second, []alerts.Alert{a}, "team:firing:1f0r"}, // 30s + group interval
		{4 * time.Minute, []alerts.Alert{a}, ""},
	})
}

// An alert that resolved and fired again in one undelivered message gets
// both back: the next message holds its old episode's resolve before its
// new trigger again (PagerDuty applies them in order).
func TestUndoneFlapKeepsResolveBeforeTrigger(t *testing.T) {
	d := newDispatcher(t)
	a := alert("Load", "checkout", alerts.P1, t0)
	d.Flush(t0, []alerts.Alert{a}, Filter{})
	d.Flush(t0.Add(30*time.Second), []alerts.Alert{a}, Filter{})
	again := alert("Load", "checkout", alerts.P1, t0.Add(time.Minute))
	ns := d.Flush(t0.Add(150*time.Second), []alerts.Alert{again}, Filter{})
	if describe(ns) != "team:firing:1f1r" {
		t.Fatalf("flap %q", describe(ns))
	}
	d.Undo(ns[0].Message)
	ns = d.Flush(t0.Add(270*time.Second), []alerts.Alert{again}, Filter{})
	if describe(ns) != "team:firing:1f1r" {
		t.Fatalf("after undo %q", describe(ns))
	}
	got := ns[0].Message.Alerts
	if got[0].Status != notify.StatusResolved || !got[0].StartsAt.Equal(t0) ||
		got[1].Status != notify.StatusFiring || !got[1].StartsAt.Equal(again.StartsAt) {
		t.Fatalf("alerts %+v, want the old episode resolved, then the new one firing", got)
	}
}

// A firing alert announced again by a later message is not taken back with
// an earlier undelivered one: the later message carries it.
func TestUndoKeepsWhatALaterMessageAnnounced(t *testing.T) {
	d := newDispatcher(t)
	a := alert("Shed", "checkout", alerts.P0, t0)
	d.Flush(t0, []alerts.Alert{a}, Filter{})
	first := d.Flush(t0.Add(30*time.Second), []alerts.Alert{a}, Filter{})
	b := alert("Shed", "checkout", alerts.P0, t0.Add(time.Minute))
	b.Labels["instance"] = "i2"
	if ns := d.Flush(t0.Add(150*time.Second), []alerts.Alert{a, b}, Filter{}); describe(ns) != "team:firing:2f0r" {
		t.Fatalf("second message %q", describe(ns))
	}
	d.Undo(first[0].Message)
	run(t, d, Filter{}, []step{
		{5 * time.Minute, []alerts.Alert{a, b}, ""},
		{7*time.Minute + 30*time.Second, []alerts.Alert{a, b}, "team:firing:2f0r"}, // P0 repeat
	})
}
