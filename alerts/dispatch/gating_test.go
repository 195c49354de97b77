package dispatch

import (
	"fmt"
	"testing"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/notify"
)

// A group holding a notified P1 and a firing P2 of the same rule and
// service (GovernorSignalAboveLevel critical + warn): when the P1 resolves
// outside business hours, its resolve goes out at the group interval (a P1
// page is not gated by business hours), not on Monday at 09:00.
func TestP1ResolveNotHeldByP2BusinessHours(t *testing.T) {
	d := newDispatcher(t)
	fri20 := time.Date(2026, 3, 6, 20, 0, 0, 0, time.UTC) // Friday 20:00 UTC, after hours
	p1 := alert("GovernorSignalAboveLevel", "checkout", alerts.P1, fri20)
	p1.Labels["level"] = "critical"
	p2 := alert("GovernorSignalAboveLevel", "checkout", alerts.P2, fri20)
	p2.Labels["level"] = "warn"
	// P1 and P2 fire together: the P1 tier pages at night after the group wait.
	ns := d.Flush(fri20, []alerts.Alert{p1, p2}, Filter{})
	if len(ns) != 0 {
		t.Fatalf("notified before group wait: %v", describe(ns))
	}
	ns = d.Flush(fri20.Add(30*time.Second), []alerts.Alert{p1, p2}, Filter{})
	if describe(ns) != "team:firing:2f0r" {
		t.Fatalf("first page: %q", describe(ns))
	}
	// The critical level clears at 20:10, warn stays.
	res := p1
	res.EndsAt = fri20.Add(10 * time.Minute)
	for at := 10 * time.Minute; at <= 3*time.Hour; at += 30 * time.Second {
		ns = d.Flush(fri20.Add(at), []alerts.Alert{res, p2}, Filter{})
		for _, n := range ns {
			for _, a := range n.Message.Alerts {
				if a.Status == notify.StatusResolved && a.Labels["severity"] == "P1" {
					return // the P1 resolve went out
				}
			}
		}
	}
	t.Fatalf("the resolve of the paged P1 was not sent within 3h of 20:10 Friday")
}

// Two routes of one receiver with the same group_by (the first with
// continue) put the alert in one group once: one PagerDuty trigger, one
// Slack attachment, one webhook entry.
func TestSameReceiverOnTwoRoutesListsAlertOnce(t *testing.T) {
	d := newDispatcher(t, Route{Receiver: "team", Severities: []alerts.Severity{alerts.P0}, Continue: true}, Route{Receiver: "team"})
	a := alert("Shed", "checkout", alerts.P0, t0)
	d.Flush(t0, []alerts.Alert{a}, Filter{})
	ns := d.Flush(t0.Add(30*time.Second), []alerts.Alert{a}, Filter{})
	if len(ns) != 1 {
		t.Fatalf("notifications %v", describe(ns))
	}
	if n := len(ns[0].Message.Alerts); n != 1 {
		t.Fatalf("one alert listed %d times in the notification: %q", n, describe(ns))
	}
}

// A P2 that resolves after business hours has its resolve held until
// Monday 09:00, long after the resolved alert left the current alerts
// (rule.ResolvedRetention): the resolve reports when the alert resolved,
// Friday 17:30, as Alertmanager's endsAt, not when it was sent.
func TestHeldP2ResolveReportsWhenTheAlertResolved(t *testing.T) {
	d := newDispatcher(t)
	fri := time.Date(2026, 3, 6, 16, 0, 0, 0, time.UTC) // Friday 16:00
	a := alert("Breaker", "checkout", alerts.P2, fri)
	d.Flush(fri, []alerts.Alert{a}, Filter{})
	if got := describe(d.Flush(fri.Add(30*time.Second), []alerts.Alert{a}, Filter{})); got != "team:firing:1f0r" {
		t.Fatalf("first notification %q", got)
	}
	end := time.Date(2026, 3, 6, 17, 30, 0, 0, time.UTC)
	r := a
	r.EndsAt = end
	var got []notify.Alert
	for at := end; !at.After(time.Date(2026, 3, 9, 9, 0, 0, 0, time.UTC)); at = at.Add(time.Minute) {
		var as []alerts.Alert
		if at.Sub(end) < 15*time.Minute { // then it leaves the current alerts
			as = []alerts.Alert{r}
		}
		for _, n := range d.Flush(at, as, Filter{}) {
			got = append(got, n.Message.Alerts...)
		}
	}
	if len(got) != 1 || got[0].Status != notify.StatusResolved || !got[0].EndsAt.Equal(end) {
		t.Fatalf("notified %+v, want one resolve ending at %s", got, end)
	}
	// The recorded end is reported for the caller to store with the group.
	d2 := newDispatcher(t)
	d2.Flush(fri, []alerts.Alert{a}, Filter{})
	d2.Flush(fri.Add(30*time.Second), []alerts.Alert{a}, Filter{})
	d2.TakeChanges()
	d2.Flush(end, []alerts.Alert{r}, Filter{})
	changed, _ := d2.TakeChanges()
	st, ok := d2.State(GroupRef{Receiver: "team", Key: `{alertname="Breaker", service="checkout"}`})
	if len(changed) != 1 || !ok || !st.Notified[a.Fingerprint().String()].EndsAt.Equal(end) {
		t.Fatalf("changed %v, state %+v: the end is not in the group state to store", changed, st)
	}
}

// TestFlushInAZoneCostsWhatAFlushInUTCDoes: P2 groups held for business
// hours in a named zone cost a flush no more allocations than in UTC: the
// zone is loaded once, not for every group at every flush.
func TestFlushInAZoneCostsWhatAFlushInUTCDoes(t *testing.T) {
	allocs := func(loc string) float64 {
		bh := DefaultBusinessHours()
		bh.Location = loc
		d, err := New([]Route{{Receiver: "team"}}, Timing{BusinessHours: bh})
		if err != nil {
			t.Fatal(err)
		}
		as := make([]alerts.Alert, 0, 100)
		for i := range 100 {
			as = append(as, alerts.Alert{Labels: alerts.Labels{"alertname": "R", "service": fmt.Sprintf("s%d", i), "severity": "P2"}, StartsAt: t0})
		}
		d.Flush(t0, as, Filter{})
		d.Flush(t0.Add(time.Minute), as, Filter{})
		now := t0.Add(2 * time.Minute)
		return testing.AllocsPerRun(20, func() { d.Flush(now, as, Filter{}) })
	}
	utc, zone := allocs(""), allocs("Europe/Paris")
	if zone > utc {
		t.Fatalf("a flush of 100 P2 groups allocates %v times in Europe/Paris, %v times in UTC", zone, utc)
	}
	// A copy of the timing whose zone was changed reads its own zone.
	d, err := New([]Route{{Receiver: "team"}}, Timing{BusinessHours: BusinessHours{Location: "Europe/Paris"}})
	if err != nil {
		t.Fatal(err)
	}
	bh := d.Timing().BusinessHours
	bh.Location = "America/New_York"
	if at := time.Date(2026, 3, 2, 17, 30, 0, 0, time.UTC); !bh.Contains(at) { // 12:30 in New York, 18:30 in Paris
		t.Fatal("a copy changed to New York still reads the hours in Paris")
	}
}
