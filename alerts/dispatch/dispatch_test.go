package dispatch

import (
	"errors"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/notify"
)

// Monday 2026-03-02 10:00 UTC, inside business hours.
var t0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

func alert(name, service string, sev alerts.Severity, starts time.Time) alerts.Alert {
	return alerts.Alert{Labels: alerts.Labels{"alertname": name, "service": service, "severity": string(sev)}, StartsAt: starts}
}

func newDispatcher(t *testing.T, routes ...Route) *Dispatcher {
	t.Helper()
	if len(routes) == 0 {
		routes = []Route{{Receiver: "team"}}
	}
	d, err := New(routes, Timing{GroupWait: 30 * time.Second, GroupInterval: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

type step struct {
	at     time.Duration
	alerts []alerts.Alert
	want   string // "" for no notification, else "status:n firing,m resolved"
}

func describe(ns []Notification) string {
	if len(ns) == 0 {
		return ""
	}
	var parts []string
	for _, n := range ns {
		f, r := 0, 0
		for _, a := range n.Message.Alerts {
			if a.Status == notify.StatusFiring {
				f++
			} else {
				r++
			}
		}
		parts = append(parts, n.Message.Receiver+":"+n.Message.Status+":"+itoa(f)+"f"+itoa(r)+"r")
	}
	return strings.Join(parts, " ")
}

func itoa(i int) string { return string(rune('0' + i)) }

func run(t *testing.T, d *Dispatcher, f Filter, steps []step) {
	t.Helper()
	for _, s := range steps {
		got := describe(d.Flush(t0.Add(s.at), s.alerts, f))
		if got != s.want {
			t.Fatalf("at %s: got %q, want %q", s.at, got, s.want)
		}
	}
}

func TestGroupWaitIntervalAndRepeatPerTier(t *testing.T) {
	a := alert("Shed", "checkout", alerts.P0, t0)
	b := alert("Shed", "checkout", alerts.P0, t0.Add(40*time.Second))
	b.Labels["instance"] = "i2"
	both := []alerts.Alert{a, b}
	run(t, newDispatcher(t), Filter{}, []step{
		{0, []alerts.Alert{a}, ""},
		{29 * time.Second, []alerts.Alert{a}, ""},
		{30 * time.Second, []alerts.Alert{a}, "team:firing:1f0r"}, // group wait
		{40 * time.Second, both, ""},                              // new alert waits for the group interval
		{150 * time.Second, both, "team:firing:2f0r"},             // 30s + 2m
		{6 * time.Minute, both, ""},
		{7*time.Minute + 30*time.Second, both, "team:firing:2f0r"}, // P0 repeats after 5m
	})
	p1 := alert("Load", "checkout", alerts.P1, t0)
	run(t, newDispatcher(t), Filter{}, []step{
		{0, []alerts.Alert{p1}, ""},
		{30 * time.Second, []alerts.Alert{p1}, "team:firing:1f0r"},
		{30*time.Second + 59*time.Minute, []alerts.Alert{p1}, ""},
		{30*time.Second + time.Hour, []alerts.Alert{p1}, "team:firing:1f0r"}, // P1 repeats after 1h
	})
}

func TestResolveNotifiedOnceAndGroupForgotten(t *testing.T) {
	a := alert("Shed", "checkout", alerts.P0, t0)
	r := a
	r.EndsAt = t0.Add(3 * time.Minute)
	d := newDispatcher(t)
	run(t, d, Filter{}, []step{
		{0, []alerts.Alert{a}, ""},
		{30 * time.Second, []alerts.Alert{a}, "team:firing:1f0r"},
		{3 * time.Minute, []alerts.Alert{r}, "team:resolved:0f1r"},
		{4 * time.Minute, []alerts.Alert{r}, ""},
		{30 * time.Minute, nil, ""},
	})
	if len(d.States()) != 0 {
		t.Fatalf("group kept after resolve: %+v", d.States())
	}
}

func TestP2WaitsForBusinessHours(t *testing.T) {
	fri := time.Date(2026, 3, 6, 18, 0, 0, 0, time.UTC) // Friday 18:00
	a := alert("Breaker", "checkout", alerts.P2, fri)
	d := newDispatcher(t)
	for _, at := range []time.Time{fri.Add(time.Minute), fri.Add(24 * time.Hour), time.Date(2026, 3, 9, 8, 59, 0, 0, time.UTC)} {
		if ns := d.Flush(at, []alerts.Alert{a}, Filter{}); len(ns) != 0 {
			t.Fatalf("P2 notified outside business hours at %s", at)
		}
	}
	mon := time.Date(2026, 3, 9, 9, 0, 0, 0, time.UTC)
	if ns := d.Flush(mon, []alerts.Alert{a}, Filter{}); len(ns) != 1 {
		t.Fatal("P2 not notified when business hours opened")
	}
	if ns := d.Flush(mon.Add(23*time.Hour), []alerts.Alert{a}, Filter{}); len(ns) != 0 {
		t.Fatal("P2 repeated before a day")
	}
	if ns := d.Flush(mon.Add(24*time.Hour), []alerts.Alert{a}, Filter{}); len(ns) != 1 {
		t.Fatal("P2 not repeated daily")
	}
}

func TestMutedAndAcknowledged(t *testing.T) {
	a := alert("Load", "checkout", alerts.P1, t0)
	muted := true
	acked := false
	f := Filter{Muted: func(alerts.Fingerprint, alerts.Alert) bool { return muted }, Acknowledged: func(alerts.Fingerprint, alerts.Alert) bool { return acked }}
	d := newDispatcher(t)
	if ns := d.Flush(t0.Add(time.Minute), []alerts.Alert{a}, f); len(ns) != 0 {
		t.Fatal("muted alert notified")
	}
	muted = false
	run(t, d, f, []step{
		{2 * time.Minute, []alerts.Alert{a}, ""}, // group wait starts when unmuted
		{2*time.Minute + 30*time.Second, []alerts.Alert{a}, "team:firing:1f0r"},
	})
	if msgs := d.Acknowledge(t0.Add(3*time.Minute), a); len(msgs) != 1 || msgs[0].Kind != notify.KindAcknowledge {
		t.Fatalf("acknowledge messages %+v", msgs)
	}
	acked = true
	r := a
	r.EndsAt = t0.Add(3 * time.Hour)
	run(t, d, f, []step{
		{2*time.Hour + 30*time.Second, []alerts.Alert{a}, ""}, // no repeat while acknowledged
		{3 * time.Hour, []alerts.Alert{r}, "team:resolved:0f1r"},
	})
}

// An alert paged, then muted while its group notified other alerts, is
// new to the receiver again once it is no longer muted: it is sent at the
// group interval, not at the repeat interval (24h for a P2), as
// Alertmanager's notification log holds only the alerts of the last
// notification. This holds across a restart. An alert muted and unmuted
// between two notifications of its group is not sent again.
func TestAlertUnmutedAfterItsGroupNotifiedIsSentAtGroupInterval(t *testing.T) {
	a := alert("Breaker", "checkout", alerts.P2, t0)
	a.Labels["instance"] = "i1"
	b := alert("Breaker", "checkout", alerts.P2, t0.Add(time.Minute))
	b.Labels["instance"] = "i2"
	afp := a.Fingerprint()
	muted := false
	f := Filter{Muted: func(fp alerts.Fingerprint, _ alerts.Alert) bool { return muted && fp == afp }}
	d := newDispatcher(t)
	run(t, d, f, []step{
		{0, []alerts.Alert{a}, ""},
		{30 * time.Second, []alerts.Alert{a}, "team:firing:1f0r"},
	})
	muted = true
	run(t, d, f, []step{
		{time.Minute, []alerts.Alert{a, b}, ""},
		{150 * time.Second, []alerts.Alert{a, b}, "team:firing:1f0r"}, // b alone
	})
	restarted := newDispatcher(t)
	restarted.Restore(d.States())
	muted = false
	run(t, restarted, f, []step{
		{10 * time.Minute, []alerts.Alert{a, b}, "team:firing:2f0r"},
		{20 * time.Minute, []alerts.Alert{a, b}, ""}, // both told: the P2 repeat is a day away
	})

	// Muted and unmuted with no notification of the group in between: the
	// receiver's last word on a is that it fires.
	muted = true
	run(t, restarted, f, []step{{21 * time.Minute, []alerts.Alert{a, b}, ""}})
	muted = false
	run(t, restarted, f, []step{{30 * time.Minute, []alerts.Alert{a, b}, ""}})
}

// A repeat interval below the group interval acts as the group interval,
// as in Alertmanager: with group_interval 10m, a P0 (repeat 5m) repeats
// every 10m.
func TestRepeatNeverMoreOftenThanGroupInterval(t *testing.T) {
	tm := Timing{GroupWait: 30 * time.Second, GroupInterval: 10 * time.Minute}
	d, err := New([]Route{{Receiver: "team"}}, tm)
	if err != nil {
		t.Fatal(err)
	}
	a := alert("Shed", "checkout", alerts.P0, t0)
	run(t, d, Filter{}, []step{
		{0, []alerts.Alert{a}, ""},
		{30 * time.Second, []alerts.Alert{a}, "team:firing:1f0r"},
		{5*time.Minute + 30*time.Second, []alerts.Alert{a}, ""},
		{10 * time.Minute, []alerts.Alert{a}, ""},
		{10*time.Minute + 30*time.Second, []alerts.Alert{a}, "team:firing:1f0r"},
	})
	if got := tm.WithDefaults().ShortRepeats(); len(got) != 1 || got[0] != alerts.P0 {
		t.Fatalf("short repeats %v, want [P0]", got)
	}
	if got := DefaultTiming().ShortRepeats(); len(got) != 0 {
		t.Fatalf("default timing has short repeats %v", got)
	}
}

func TestRoutingByLabelsAndTier(t *testing.T) {
	sev, _ := alerts.ParseMatchers(`service="checkout"`)
	d := newDispatcher(t,
		Route{Receiver: "pager", Severities: []alerts.Severity{alerts.P0}, Continue: true},
		Route{Receiver: "checkout-team", Matchers: sev},
		Route{Receiver: "default"},
	)
	run(t, d, Filter{}, []step{
		{0, []alerts.Alert{alert("Shed", "checkout", alerts.P0, t0), alert("Load", "search", alerts.P1, t0)}, ""},
		{30 * time.Second, []alerts.Alert{alert("Shed", "checkout", alerts.P0, t0), alert("Load", "search", alerts.P1, t0)},
			"checkout-team:firing:1f0r default:firing:1f0r pager:firing:1f0r"},
	})
	if _, err := New([]Route{{}}, Timing{}); err == nil {
		t.Fatal("route without receiver accepted")
	}
	if _, err := New([]Route{{Receiver: "team"}}, Timing{BusinessHours: BusinessHours{StartHour: 18, EndHour: 9}}); err == nil {
		t.Fatal("inverted business hours accepted")
	}
}

func TestRestoredStateDoesNotRenotify(t *testing.T) {
	a := alert("Shed", "checkout", alerts.P0, t0)
	d := newDispatcher(t)
	d.Flush(t0, []alerts.Alert{a}, Filter{})
	if ns := d.Flush(t0.Add(30*time.Second), []alerts.Alert{a}, Filter{}); len(ns) != 1 {
		t.Fatal("first notification")
	}
	d2 := newDispatcher(t)
	d2.Restore(d.States())
	if ns := d2.Flush(t0.Add(time.Minute), []alerts.Alert{a}, Filter{}); len(ns) != 0 {
		t.Fatalf("restored dispatcher notified again: %s", describe(ns))
	}
	if ns := d2.Flush(t0.Add(5*time.Minute+30*time.Second), []alerts.Alert{a}, Filter{}); len(ns) != 1 || ns[0].State.Seq != 2 {
		t.Fatal("restored dispatcher lost the repeat schedule")
	}
}

func TestP2DailyDigest(t *testing.T) {
	d, err := New([]Route{{Receiver: "team"}}, Timing{GroupWait: 30 * time.Second, GroupInterval: time.Minute, P2Digest: true})
	if err != nil {
		t.Fatal(err)
	}
	mon := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	early := alert("Breaker", "a", alerts.P2, mon.Add(-2*time.Hour))
	late := alert("Breaker", "b", alerts.P2, mon.Add(3*time.Hour))
	tests := []struct {
		at   time.Time
		as   []alerts.Alert
		want int
	}{
		{mon.Add(-2 * time.Hour), []alerts.Alert{early}, 0},                  // before opening
		{mon.Add(-time.Hour), []alerts.Alert{early}, 0},                      // group wait over, still closed
		{mon, []alerts.Alert{early}, 1},                                      // the digest at opening
		{mon.Add(time.Minute), []alerts.Alert{early}, 0},                     // once a day
		{mon.Add(3 * time.Hour), []alerts.Alert{early, late}, 0},             // new during the day: waits
		{mon.Add(3*time.Hour + time.Minute), []alerts.Alert{early, late}, 0}, // group wait over: still waits
		{mon.Add(24 * time.Hour), []alerts.Alert{early, late}, 2},            // next digest has both groups
		{mon.Add(25 * time.Hour), []alerts.Alert{early, late}, 0},
	}
	for _, tt := range tests {
		if got := len(d.Flush(tt.at, tt.as, Filter{})); got != tt.want {
			t.Fatalf("at %s: %d notifications, want %d", tt.at, got, tt.want)
		}
	}
	if o := DefaultBusinessHours().Opening(time.Date(2026, 3, 8, 12, 0, 0, 0, time.UTC)); !o.Equal(time.Date(2026, 3, 6, 9, 0, 0, 0, time.UTC)) {
		t.Fatalf("opening before a Sunday noon = %s, want Friday 09:00", o)
	}
}

// TestRestoreDropsUnroutedReceivers: the persisted groups of a receiver no
// route names any more are dropped, and reported forgotten so that their
// rows are removed: were they kept, adding the receiver back would restore
// what it was told before its removal and send it resolves, days later,
// for alerts it no longer knows.
func TestRestoreDropsUnroutedReceivers(t *testing.T) {
	d := newDispatcher(t)
	d.Restore([]GroupState{{Receiver: "gone", Key: "k", Notified: map[string]alerts.Alert{"x": {}}}, {Receiver: "team", Key: "k"}})
	if st := d.States(); len(st) != 1 || st[0].Receiver != "team" {
		t.Fatalf("states %+v", st)
	}
	changed, forgotten := d.TakeChanges()
	if len(changed) != 0 || len(forgotten) != 1 || forgotten[0] != (GroupRef{Receiver: "gone", Key: "k"}) {
		t.Fatalf("changes after the restore: changed %v, forgotten %v; want the group of gone forgotten", changed, forgotten)
	}
}

// TestNewRefusesRoutesThatLeaveAlertsUnrouted: routes without a catch-all
// would drop the alerts none matches; the dispatcher refuses them, as
// Alertmanager requires a root route, naming the routes.
func TestNewRefusesRoutesThatLeaveAlertsUnrouted(t *testing.T) {
	checkout, _ := alerts.ParseMatchers(`service="checkout"`)
	for _, routes := range [][]Route{
		nil,
		{{Receiver: "pager", Severities: []alerts.Severity{alerts.P0, alerts.P1, alerts.P2}}},
		{{Receiver: "pager", Severities: []alerts.Severity{alerts.P0}, Continue: true}, {Receiver: "team", Matchers: checkout}},
	} {
		if _, err := New(routes, Timing{}); !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), "routes: no route catches every alert") {
			t.Errorf("New(%+v) = %v, want an invalid-input error naming routes", routes, err)
		}
	}
}

// TestNoGroupWaitNotifiesAtFirstFlush: NoGroupWait (group_wait "0s") sends
// a new group at the flush that forms it; later changes still wait for the
// group interval.
func TestNoGroupWaitNotifiesAtFirstFlush(t *testing.T) {
	d, err := New([]Route{{Receiver: "team"}}, Timing{NoGroupWait: true, GroupInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	load := alert("Load", "a", alerts.P1, t0)
	load2 := alert("Load", "a", alerts.P1, t0)
	load2.Labels["instance"] = "2" // same group
	shed := alert("Shed", "a", alerts.P1, t0)
	run(t, d, Filter{}, []step{
		{0, []alerts.Alert{load}, "team:firing:1f0r"},
		{30 * time.Second, []alerts.Alert{load, load2, shed}, "team:firing:1f0r"}, // the new group only
		{45 * time.Second, []alerts.Alert{load, load2, shed}, ""},
		{time.Minute, []alerts.Alert{load, load2, shed}, "team:firing:2f0r"}, // Load's group interval
	})
	if _, err := New([]Route{{Receiver: "team"}}, Timing{NoGroupWait: true, GroupWait: time.Second}); !errors.Is(err, alerts.ErrInvalid) {
		t.Fatalf("NoGroupWait with a group wait: %v", err)
	}
}

// TestTimingRefusesZeroRepeat: a tier given a zero repeat interval is
// refused, naming it, rather than silently repeating at the default.
func TestTimingRefusesZeroRepeat(t *testing.T) {
	_, err := New([]Route{{Receiver: "team"}}, Timing{Repeat: map[alerts.Severity]time.Duration{alerts.P1: 0}})
	if !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), "repeat.P1: must be positive") {
		t.Fatalf("repeat P1 0: %v", err)
	}
	d, err := New([]Route{{Receiver: "team"}}, Timing{Repeat: map[alerts.Severity]time.Duration{alerts.P1: 2 * time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	if rep := d.Timing().Repeat; rep[alerts.P1] != 2*time.Hour || rep[alerts.P0] != 5*time.Minute {
		t.Fatalf("repeat in force %v", rep)
	}
}

// TestRegroupKeepsFiringAlerts: changing a receiver's group_by (a reload)
// moves the alerts it notified to their new groups. Like Alertmanager, no
// alert still firing is reported resolved because its grouping changed,
// and none is announced again before the repeat interval; a real resolve
// is still sent, by the new group. A restart that loads the old group's
// persisted state next to the newer state of the group it moved to does
// not resolve the alert a second time.
func TestRegroupKeepsFiringAlerts(t *testing.T) {
	a := alert("Shed", "checkout", alerts.P1, t0)
	b := alert("Shed", "search", alerts.P1, t0)
	before := newDispatcher(t, Route{Receiver: "team", GroupBy: []string{"alertname"}})
	run(t, before, Filter{}, []step{
		{0, []alerts.Alert{a, b}, ""},
		{30 * time.Second, []alerts.Alert{a, b}, "team:firing:2f0r"},
	})
	persisted := before.States()

	after := newDispatcher(t, Route{Receiver: "team", GroupBy: []string{"alertname", "service"}})
	after.Restore(before.States())
	aEnded := a
	aEnded.EndsAt = t0.Add(170 * time.Second)
	run(t, after, Filter{}, []step{
		{60 * time.Second, []alerts.Alert{a, b}, ""},
		{150 * time.Second, []alerts.Alert{a, b}, ""}, // the old group's interval: nothing resolved
		{10 * time.Minute, []alerts.Alert{a, b}, ""},  // nothing fresh either
	})
	if got := len(after.States()); got != 2 {
		t.Fatalf("%d groups after the regroup, want one per service: %+v", got, after.States())
	}
	run(t, after, Filter{}, []step{
		{11 * time.Minute, []alerts.Alert{aEnded, b}, "team:resolved:0f1r"}, // a real resolve, from a's new group
	})
	// What the log holds for checkout's new group: the resolve.
	var resolvedA GroupState
	for _, g := range after.States() {
		if g.Labels["service"] == "checkout" {
			resolvedA = g
		}
	}
	if resolvedA.Key == "" || len(resolvedA.Notified) != 0 || !resolvedA.SentAt.Equal(t0.Add(11*time.Minute)) {
		t.Fatalf("checkout group %+v", resolvedA)
	}
	run(t, after, Filter{}, []step{
		{12 * time.Minute, []alerts.Alert{b}, ""},
		{30*time.Second + time.Hour, []alerts.Alert{b}, "team:firing:1f0r"}, // b's repeat, from the last page
	})

	// A restart: the old group's state was never rewritten (it sent nothing
	// after the move); checkout's new group logged the resolve.
	restarted := newDispatcher(t, Route{Receiver: "team", GroupBy: []string{"alertname", "service"}})
	restarted.Restore(append(persisted, resolvedA))
	run(t, restarted, Filter{}, []step{
		{13 * time.Minute, []alerts.Alert{b}, ""},
	})
}

// TestTakeChangesAfterARegroup: a regroup reports the groups the moved
// alerts went to as changed, with their state, and the groups they left as
// forgotten; a group dropped when nothing is left in it is forgotten too,
// and one formed again since is not.
func TestTakeChangesAfterARegroup(t *testing.T) {
	a := alert("Shed", "checkout", alerts.P1, t0)
	b := alert("Shed", "search", alerts.P1, t0)
	before := newDispatcher(t, Route{Receiver: "team", GroupBy: []string{"alertname", "service"}})
	run(t, before, Filter{}, []step{
		{0, []alerts.Alert{a, b}, ""},
		{30 * time.Second, []alerts.Alert{a, b}, "team:firing:1f0r team:firing:1f0r"},
	})
	if ch, fg := before.TakeChanges(); len(ch) != 0 || len(fg) != 0 {
		t.Fatalf("notifications carry their state: changed %v, forgotten %v", ch, fg)
	}
	old := before.States()

	after := newDispatcher(t, Route{Receiver: "team", GroupBy: []string{"alertname"}})
	after.Restore(old)
	changed, forgotten := after.TakeChanges()
	byName := GroupRef{Receiver: "team", Key: `{alertname="Shed"}`}
	if len(changed) != 1 || changed[0] != byName {
		t.Fatalf("changed %v, want %v", changed, byName)
	}
	if len(forgotten) != 2 || forgotten[0] != (GroupRef{"team", old[0].Key}) || forgotten[1] != (GroupRef{"team", old[1].Key}) {
		t.Fatalf("forgotten %v, want the two groups by service", forgotten)
	}
	st, ok := after.State(byName)
	if !ok || len(st.Notified) != 2 || !st.SentAt.Equal(t0.Add(30*time.Second)) || st.Seq != 1 {
		t.Fatalf("the new group's state %+v, %v", st, ok)
	}
	if _, ok := after.State(GroupRef{"team", old[0].Key}); ok {
		t.Fatal("an old group is still held")
	}
	if ch, fg := after.TakeChanges(); len(ch) != 0 || len(fg) != 0 {
		t.Fatalf("taken twice: changed %v, forgotten %v", ch, fg)
	}

	// Both resolve: the resolve is a notification; the group is dropped
	// once the resolved alerts are no longer reported.
	aEnded, bEnded := a, b
	aEnded.EndsAt, bEnded.EndsAt = t0.Add(time.Minute), t0.Add(time.Minute)
	run(t, after, Filter{}, []step{
		{3 * time.Minute, []alerts.Alert{aEnded, bEnded}, "team:resolved:0f2r"},
		{4 * time.Minute, nil, ""},
	})
	if ch, fg := after.TakeChanges(); len(ch) != 0 || len(fg) != 1 || fg[0] != byName {
		t.Fatalf("changed %v, forgotten %v; want the empty group forgotten", ch, fg)
	}
	// Dropped and formed again before the changes are taken: not forgotten.
	c := alert("Shed", "checkout", alerts.P1, t0.Add(5*time.Minute))
	run(t, after, Filter{}, []step{
		{5 * time.Minute, []alerts.Alert{c}, ""},
		{5*time.Minute + 30*time.Second, []alerts.Alert{c}, "team:firing:1f0r"},
		{10 * time.Minute, nil, "team:resolved:0f1r"},
		{11 * time.Minute, nil, ""},
		{12 * time.Minute, []alerts.Alert{c}, ""},
	})
	if ch, fg := after.TakeChanges(); len(ch) != 0 || len(fg) != 0 {
		t.Fatalf("changed %v, forgotten %v; want nothing for a group formed again", ch, fg)
	}
}

// Two routes to one receiver with different group_by: each group carries
// the labels of its own group_by.
func TestGroupLabelsComeFromTheRouteThatFormedTheGroup(t *testing.T) {
	d, err := New([]Route{
		{Receiver: "team", Severities: []alerts.Severity{alerts.P0}, GroupBy: []string{"alertname"}, Continue: true},
		{Receiver: "team", GroupBy: []string{"service"}},
	}, Timing{NoGroupWait: true, GroupInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ns := d.Flush(t0, []alerts.Alert{alert("Shed", "checkout", alerts.P0, t0)}, Filter{})
	if len(ns) != 2 {
		t.Fatalf("%d notifications, want 2", len(ns))
	}
	for _, n := range ns {
		if n.State.Key != n.Message.GroupLabels.String() {
			t.Errorf("group %s has group labels %s", n.State.Key, n.Message.GroupLabels)
		}
	}
}

// TestReceiverNameWithNulByteKeepsItsGroups: a receiver whose name holds a
// NUL byte (a configuration may carry "\u0000") gets its own
// notifications, under its own name: the groups are not named by joining
// the receiver and the key with a byte that a name can hold.
func TestReceiverNameWithNulByteKeepsItsGroups(t *testing.T) {
	d, err := New([]Route{{Receiver: "team\x00x"}}, Timing{NoGroupWait: true, GroupInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ns := d.Flush(t0, []alerts.Alert{alert("Shed", "checkout", alerts.P0, t0)}, Filter{})
	if len(ns) != 1 {
		t.Fatalf("%d notifications, want 1", len(ns))
	}
	want := GroupRef{Receiver: "team\x00x", Key: `{alertname="Shed", service="checkout"}`}
	if got := (GroupRef{Receiver: ns[0].Message.Receiver, Key: ns[0].Message.GroupKey}); got != want {
		t.Fatalf("notification for %q, want %q", got, want)
	}
	if got := (GroupRef{Receiver: ns[0].State.Receiver, Key: ns[0].State.Key}); got != want {
		t.Fatalf("state of %q, want %q", got, want)
	}
}

// TestGroupByAllLabelsGroupsEachLabelSetAlone: group_by ["..."], as in
// Alertmanager, groups by every label, so each distinct label set is its
// own group, whose group labels are all its labels.
func TestGroupByAllLabelsGroupsEachLabelSetAlone(t *testing.T) {
	d := newDispatcher(t, Route{Receiver: "team", GroupBy: []string{GroupByAll}})
	a := alert("Down", "checkout", alerts.P1, t0)
	b := alert("Down", "checkout", alerts.P1, t0)
	b.Labels["instance"] = "i2"
	c := alert("Down", "search", alerts.P1, t0)
	as := []alerts.Alert{a, b, c}
	d.Flush(t0, as, Filter{})
	ns := d.Flush(t0.Add(30*time.Second), as, Filter{})
	if len(ns) != 3 {
		t.Fatalf("%d notifications, want one per label set: %s", len(ns), describe(ns))
	}
	for _, n := range ns {
		if len(n.Message.Alerts) != 1 {
			t.Fatalf("group %s holds %d alerts", n.Message.GroupKey, len(n.Message.Alerts))
		}
		l := n.Message.Alerts[0].Labels
		if n.Message.GroupKey != l.String() || n.Message.GroupLabels.String() != l.String() {
			t.Fatalf("group key %s, labels %s, want both %s", n.Message.GroupKey, n.Message.GroupLabels, l)
		}
	}
	// A resolve is sent by the alert's own group.
	ended := []alerts.Alert{a, b, c}
	ended[1].EndsAt = t0.Add(time.Minute)
	ns = d.Flush(t0.Add(3*time.Minute), ended, Filter{})
	if got := describe(ns); got != "team:resolved:0f1r" || ns[0].Message.GroupKey != b.Labels.String() {
		t.Fatalf("after one resolved: %q", got)
	}
}

// TestGroupByAllMustStandAlone: "..." with other names is refused, naming
// the field, as Alertmanager does.
func TestGroupByAllMustStandAlone(t *testing.T) {
	_, err := New([]Route{{Receiver: "team", GroupBy: []string{"service", GroupByAll}}}, Timing{})
	if !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), `group_by[1]: "..." groups by every label and must be the only name`) {
		t.Fatalf("New() = %v", err)
	}
}

// TestRouteValidateNamesTheBadGroupByEntry: a group_by entry that is not a
// label name is refused by the route's own validation, which the
// configuration relies on, naming the entry by its index.
func TestRouteValidateNamesTheBadGroupByEntry(t *testing.T) {
	for _, tt := range []struct {
		groupBy []string
		want    string
	}{
		{[]string{"service", "service-name"}, `route team: group_by[1]: "service-name" is not a label name`},
		{[]string{""}, `route team: group_by[0]: "" is not a label name`},
		{[]string{GroupByAll, "service"}, `route team: group_by[0]: "..." groups by every label and must be the only name`},
	} {
		err := Route{Receiver: "team", GroupBy: tt.groupBy}.Validate()
		if !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Validate(group_by %q) = %v, want an invalid-input error containing %q", tt.groupBy, err, tt.want)
		}
	}
	if err := (Route{Receiver: "team", GroupBy: []string{GroupByAll}}).Validate(); err != nil {
		t.Errorf("group_by [\"...\"]: %v", err)
	}
}
