package dispatch

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/notify"
)

// stormRoutes sends P0 to pager by alertname, services s0-s3 to team-b
// (a receiver whose name extends another's) by service, and everything to
// team by zone and service.
func stormRoutes(t *testing.T) []Route {
	t.Helper()
	ms, err := alerts.ParseMatchers(`service=~"s[0-3]"`)
	if err != nil {
		t.Fatal(err)
	}
	return []Route{
		{Receiver: "pager", Severities: []alerts.Severity{alerts.P0}, Continue: true, GroupBy: []string{"alertname"}},
		{Receiver: "team-b", Matchers: ms, Continue: true, GroupBy: []string{"service", "alertname", "service"}},
		{Receiver: "team", GroupBy: []string{"zone", "service"}},
	}
}

// stormAlerts returns n alerts over 8 services, some with a zone whose
// value holds quotes, commas, '=', braces, a NUL byte or nothing.
func stormAlerts(rng *rand.Rand, n int, starts time.Time) []alerts.Alert {
	zones := []string{"a", `b"`, "c, d", "e=f", "\x00", "{x}", "ü", ""}
	out := make([]alerts.Alert, n)
	for i := range out {
		l := alerts.Labels{"alertname": fmt.Sprintf("R%d", rng.IntN(4)), "service": fmt.Sprintf("s%d", rng.IntN(8)),
			"instance": fmt.Sprint(i), "severity": []string{"P0", "P1", "P2"}[rng.IntN(3)]}
		if rng.IntN(3) == 0 {
			l["zone"] = zones[rng.IntN(len(zones))]
		}
		out[i] = alerts.Alert{Labels: l, StartsAt: starts}
	}
	return out
}

// TestStormNotificationsKeepTheirOrderAndGroups: in a random storm (fixed
// seed) whose groups form and drop from step to step, each flush returns
// its notifications sorted by receiver + "\x00" + key, as when every
// flush sorted every group, each acknowledgement its messages in that
// order, and each notification holds exactly the alerts its routes group
// under its key, firing ones sorted by fingerprint.
func TestStormNotificationsKeepTheirOrderAndGroups(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	routes := stormRoutes(t)
	d, err := New(routes, Timing{GroupWait: 30 * time.Second, GroupInterval: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	pool := stormAlerts(rng, 400, t0)
	former := func(r GroupRef) string { return r.Receiver + "\x00" + r.Key }
	notified := 0
	for step := range 60 {
		now := t0.Add(time.Duration(step) * 20 * time.Second)
		var as []alerts.Alert
		for i := range pool {
			if rng.IntN(30) == 0 { // resolve, or fire again
				if pool[i].EndsAt.IsZero() {
					pool[i].EndsAt = now
				} else {
					pool[i].EndsAt, pool[i].StartsAt = time.Time{}, now
				}
			}
			if rng.IntN(8) > 0 { // some leave the current alerts for a while
				as = append(as, pool[i])
			}
		}
		// The groups each current firing alert belongs to, as the routes say.
		want := map[GroupRef]map[string]bool{}
		for _, a := range as {
			if a.Resolved(now) {
				continue
			}
			for _, r := range routes {
				if !r.Matches(a.Labels) {
					continue
				}
				ref := GroupRef{Receiver: r.Receiver, Key: a.Labels.Subset(r.groupBy()).String()}
				if want[ref] == nil {
					want[ref] = map[string]bool{}
				}
				want[ref][a.Fingerprint().String()] = true
				if !r.Continue {
					break
				}
			}
		}
		ns := d.Flush(now, as, Filter{})
		notified += len(ns)
		var refs []string
		for _, n := range ns {
			ref := GroupRef{Receiver: n.Message.Receiver, Key: n.Message.GroupKey}
			refs = append(refs, former(ref))
			// Firing, then resolved, then those fired again since their
			// resolve, each by fingerprint.
			var firing, order []string
			resolved := map[string]bool{}
			for _, a := range n.Message.Alerts {
				if a.Status == notify.StatusResolved {
					resolved[a.Fingerprint] = true
				}
			}
			for _, a := range n.Message.Alerts {
				rank := "0"
				switch {
				case a.Status == notify.StatusResolved:
					rank = "1"
				case resolved[a.Fingerprint]:
					rank = "2"
				}
				order = append(order, rank+a.Fingerprint)
				if a.Status == notify.StatusFiring {
					firing = append(firing, a.Fingerprint)
				}
			}
			if !slices.IsSorted(order) || len(firing) != len(want[ref]) {
				t.Fatalf("step %d: group %q notified %d firing alerts %v, want the %d of its key, in order", step, ref, len(firing), order, len(want[ref]))
			}
			for _, fp := range firing {
				if !want[ref][fp] {
					t.Fatalf("step %d: group %q notified %s, not one of its alerts", step, ref, fp)
				}
			}
		}
		if !slices.IsSorted(refs) {
			t.Fatalf("step %d: notifications in order %q", step, refs)
		}
		a := pool[rng.IntN(len(pool))]
		var acks []string
		for _, m := range d.Acknowledge(now, a) {
			acks = append(acks, former(GroupRef{Receiver: m.Receiver, Key: m.GroupKey}))
		}
		if !slices.IsSorted(acks) {
			t.Fatalf("step %d: acknowledgements in order %q", step, acks)
		}
	}
	if notified < 100 {
		t.Fatalf("%d notifications: the storm tests little", notified)
	}
}

// TestGroupKeyIsTheStringOfTheGroupLabels: the key a flush writes for a
// group is the group labels' String, also for values holding quotes,
// separators, braces, NUL bytes or nothing, and for a group_by naming a
// label twice or one the alert lacks.
func TestGroupKeyIsTheStringOfTheGroupLabels(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	names := [][]string{{"alertname"}, {"zone", "service"}, {"service", "alertname", "service"}, {"missing"}}
	for _, a := range stormAlerts(rng, 200, t0) {
		for _, gb := range names {
			sorted := slices.Compact(slices.Sorted(slices.Values(gb)))
			if got, want := string(appendGroupKey(nil, a.Labels, sorted)), a.Labels.Subset(gb).String(); got != want {
				t.Fatalf("group key of %v by %v: %q, want %q", a.Labels, gb, got, want)
			}
		}
	}
	for _, fp := range []alerts.Fingerprint{0, 1, 0xabc, 1<<64 - 1} {
		s := string(appendFingerprint(nil, fp))
		if s != fp.String() {
			t.Fatalf("fingerprint %d written %q, want %q", fp, s, fp.String())
		}
		if back, ok := parseFingerprint(s); !ok || back != fp {
			t.Fatalf("fingerprint %q read as %d, %v", s, back, ok)
		}
	}
	for _, s := range []string{"", "abc", "0000000000000ABC", "000000000000000g", "00000000000000000"} {
		if _, ok := parseFingerprint(s); ok {
			t.Fatalf("%q read as a fingerprint", s)
		}
	}
}

// TestStormGroupsAreDroppedOnceResolved: after a storm of 2,000 alerts
// over 400 services is notified and resolves, and the resolved alerts
// leave the current alerts, the dispatcher holds no group: a storm does
// not leave thousands of empty groups behind to be flushed at every step.
func TestStormGroupsAreDroppedOnceResolved(t *testing.T) {
	d := newDispatcher(t)
	var as []alerts.Alert
	for i := range 2000 {
		a := alert("DependencyDown", fmt.Sprintf("svc%03d", i%400), alerts.P0, t0)
		a.Labels["instance"] = fmt.Sprint(i)
		as = append(as, a)
	}
	d.Flush(t0, as, Filter{})
	if ns := d.Flush(t0.Add(30*time.Second), as, Filter{}); len(ns) != 400 {
		t.Fatalf("%d notifications, want one per service", len(ns))
	}
	ended := slices.Clone(as)
	for i := range ended {
		ended[i].EndsAt = t0.Add(time.Minute)
	}
	if ns := d.Flush(t0.Add(3*time.Minute), ended, Filter{}); len(ns) != 400 || ns[0].Message.Status != notify.StatusResolved {
		t.Fatalf("%d resolves, want one per service", len(ns))
	}
	d.Flush(t0.Add(20*time.Minute), nil, Filter{})
	if st := d.States(); len(st) != 0 {
		t.Fatalf("%d groups held after the storm resolved", len(st))
	}
	if _, forgotten := d.TakeChanges(); len(forgotten) != 400 || !strings.HasPrefix(forgotten[0].Key, "{") {
		t.Fatalf("%d groups reported dropped, want 400", len(forgotten))
	}
	if len(d.ordered()) != 0 || len(d.order) != 0 {
		t.Fatalf("the group order holds %d refs of dropped groups", len(d.order))
	}
}
