package pagerduty

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/sdk/clock"
)

// windowPD is a PagerDuty that lets through limit events per rolling
// minute of the fake clock and answers 429 past it, with Retry-After when
// retryAfter is set.
type windowPD struct {
	mu         sync.Mutex
	f          *clock.Fake
	limit      int
	retryAfter string
	times      []time.Time // of accepted events
	got        []Event
	refused    int
}

func (p *windowPD) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var e Event
	_ = json.NewDecoder(r.Body).Decode(&e)
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.f.Now()
	in := 0
	for _, t := range p.times {
		if now.Sub(t) < time.Minute {
			in++
		}
	}
	if in >= p.limit {
		p.refused++
		if p.retryAfter != "" {
			w.Header().Set("Retry-After", p.retryAfter)
		}
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	p.times = append(p.times, now)
	p.got = append(p.got, e)
	w.WriteHeader(http.StatusAccepted)
}

func (p *windowPD) accepted() ([]Event, []time.Time, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Event(nil), p.got...), append([]time.Time(nil), p.times...), p.refused
}

// fakeNotifier returns a notifier on the fake clock whose waits advance
// that clock at once.
func fakeNotifier(t *testing.T, f *clock.Fake, srv *httptest.Server) *Notifier {
	t.Helper()
	n, err := New(Config{RoutingKey: "rk", URL: srv.URL}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	n.clock = f
	n.sleep = func(_ context.Context, d time.Duration) error { f.Advance(d); return nil }
	return n
}

// deliver plays the receiver queue for one message: attempts of 10s of
// the fake clock, waiting the Retry-After (or 1s) between failed ones.
// An attempt not made (notify.ErrNotAttempted) waits for its slot and, as
// in the queue, is no failed attempt. It returns the number of attempts
// that failed without progress.
func deliver(t *testing.T, f *clock.Fake, n *Notifier, m *notify.Message) int {
	t.Helper()
	failed := 0
	for attempt := 1; ; attempt++ {
		if attempt > 500 {
			t.Fatal("message never delivered")
		}
		ctx, cancel := context.WithDeadline(context.Background(), f.Now().Add(10*time.Second))
		retry, err := n.Notify(ctx, m)
		cancel()
		if err == nil {
			return failed
		}
		if !retry {
			t.Fatalf("final error: %v", err)
		}
		if errors.Is(err, notify.ErrPartial) {
			continue
		}
		if !errors.Is(err, notify.ErrNotAttempted) {
			failed++
		}
		wait := time.Second
		var se *notify.StatusError
		if errors.As(err, &se) && se.Wait(f.Now()) > 0 {
			wait = se.Wait(f.Now())
		}
		f.Advance(wait)
	}
}

// group returns n firing alerts of severity sev, services prefix0...
func group(n int, sev string, prefix string) []notify.Alert {
	var as []notify.Alert
	for i := range n {
		l := alerts.Labels{"alertname": "X", "service": fmt.Sprint(prefix, i), "severity": sev}
		as = append(as, notify.Alert{Alert: alerts.Alert{Labels: l}, Status: notify.StatusFiring, Fingerprint: l.Fingerprint().String()})
	}
	return as
}

// Two receivers on one routing key, a storm of 300 events: the events are
// paced ahead of PagerDuty's 120 per minute, so none is refused and none
// is lost.
func TestStormOnOneRoutingKeyIsPacedWithoutA429(t *testing.T) {
	start := time.Now().Add(time.Hour)
	f := clock.NewFake(start)
	pd := &windowPD{f: f, limit: 120}
	srv := httptest.NewServer(pd)
	defer srv.Close()
	a, b := fakeNotifier(t, f, srv), fakeNotifier(t, f, srv)
	ma := notify.NewMessage(notify.KindNotify, "team-a", "ga", nil, group(200, "P2", "a-"), start)
	mb := notify.NewMessage(notify.KindNotify, "team-b", "gb", nil, group(100, "P2", "b-"), start)
	if failed := deliver(t, f, a, ma) + deliver(t, f, b, mb); failed != 0 {
		t.Errorf("%d attempts failed without progress, want 0", failed)
	}
	got, _, refused := pd.accepted()
	if refused != 0 {
		t.Errorf("PagerDuty refused %d events with 429, want 0", refused)
	}
	if len(got) != 300 {
		t.Fatalf("%d events accepted, want 300", len(got))
	}
}

// A P0 page on a routing key that a P2 storm keeps busy goes out at once:
// the storm leaves it headroom in the key's bucket.
func TestP0TriggerDoesNotWaitBehindAStormOnItsRoutingKey(t *testing.T) {
	start := time.Now().Add(time.Hour)
	f := clock.NewFake(start)
	pd := &windowPD{f: f, limit: 120}
	srv := httptest.NewServer(pd)
	defer srv.Close()
	storm, pager := fakeNotifier(t, f, srv), fakeNotifier(t, f, srv)
	ctx, cancel := context.WithDeadline(context.Background(), f.Now().Add(10*time.Second))
	retry, err := storm.Notify(ctx, notify.NewMessage(notify.KindNotify, "team-a", "ga", nil, group(200, "P2", "a-"), start))
	cancel()
	if !retry || !errors.Is(err, notify.ErrPartial) {
		t.Fatalf("storm attempt: retry %v err %v, want a partial delivery", retry, err)
	}
	before := f.Now()
	p0 := group(1, "P0", "p0-")
	ctx, cancel = context.WithDeadline(context.Background(), f.Now().Add(10*time.Second))
	defer cancel()
	if _, err := pager.Notify(ctx, notify.NewMessage(notify.KindNotify, "pager", "gp", nil, p0, start)); err != nil {
		t.Fatal(err)
	}
	got, times, _ := pd.accepted()
	last := got[len(got)-1]
	if last.DedupKey != p0[0].Fingerprint || !times[len(times)-1].Equal(before) {
		t.Fatalf("P0 trigger accepted at +%s, want at once", times[len(times)-1].Sub(before))
	}
}

// In a mixed group, the P0 triggers go first; the events of one alert keep
// their order (the old episode's trigger before its resolve).
func TestP0EventsOfAGroupGoFirstAndEachAlertKeepsItsOrder(t *testing.T) {
	start := time.Now().Add(time.Hour)
	f := clock.NewFake(start)
	pd := &windowPD{f: f, limit: 120}
	srv := httptest.NewServer(pd)
	defer srv.Close()
	n := fakeNotifier(t, f, srv)
	as := group(30, "P2", "a-")
	old := as[3]
	old.Status, old.EndsAt = notify.StatusResolved, start
	as = append(as[:4], append([]notify.Alert{old}, as[4:]...)...) // trigger then resolve of a-3
	p0 := group(2, "P0", "p0-")
	as = append(as, p0...)
	if failed := deliver(t, f, n, notify.NewMessage(notify.KindNotify, "pd", "g", nil, as, start)); failed != 0 {
		t.Fatalf("%d failed attempts", failed)
	}
	got, _, _ := pd.accepted()
	if len(got) != len(as) || got[0].DedupKey != p0[0].Fingerprint || got[1].DedupKey != p0[1].Fingerprint {
		t.Fatalf("%d events; first %v %v: want the P0 triggers first", len(got), got[0].DedupKey, got[1].DedupKey)
	}
	var order []string
	for _, e := range got {
		if e.DedupKey == old.Fingerprint {
			order = append(order, e.EventAction)
		}
	}
	if strings.Join(order, ",") != "trigger,resolve" {
		t.Fatalf("events of one alert in order %v, want trigger,resolve", order)
	}
}

// A 429 with Retry-After pauses every group on the routing key: another
// receiver's attempt sends nothing before then and tells the queue how
// long to wait; afterwards everything is delivered.
func TestRetryAfterPausesEveryGroupOfTheRoutingKey(t *testing.T) {
	start := time.Now().Add(time.Hour)
	f := clock.NewFake(start)
	pd := &windowPD{f: f, limit: 0, retryAfter: "30"}
	srv := httptest.NewServer(pd)
	defer srv.Close()
	a, b := fakeNotifier(t, f, srv), fakeNotifier(t, f, srv)
	ctx, cancel := context.WithDeadline(context.Background(), f.Now().Add(10*time.Second))
	defer cancel()
	if retry, err := a.Notify(ctx, notify.NewMessage(notify.KindNotify, "team-a", "ga", nil, group(3, "P1", "a-"), start)); !retry || err == nil {
		t.Fatalf("retry %v err %v: want the 429", retry, err)
	}
	pd.mu.Lock()
	pd.limit = 120
	pd.mu.Unlock()
	ctx2, cancel2 := context.WithDeadline(context.Background(), f.Now().Add(10*time.Second))
	defer cancel2()
	retry, err := b.Notify(ctx2, notify.NewMessage(notify.KindNotify, "team-b", "gb", nil, group(3, "P0", "b-"), start))
	var se *notify.StatusError
	if !retry || !errors.As(err, &se) || se.Wait(f.Now()) != 30*time.Second {
		t.Fatalf("retry %v err %v: want a retry after PagerDuty's 30s", retry, err)
	}
	if got, _, refused := pd.accepted(); len(got) != 0 || refused != 1 {
		t.Fatalf("%d accepted, %d refused during the pause: want 0 and the one 429", len(got), refused)
	}
	f.Advance(30 * time.Second)
	if failed := deliver(t, f, b, notify.NewMessage(notify.KindNotify, "team-b", "gb", nil, group(3, "P0", "b-"), start)); failed != 0 {
		t.Fatalf("%d failed attempts after the pause", failed)
	}
}

// An attempt that sends nothing because the routing key is held back (a
// Retry-After that another receiver drew, or the pacing) tells the queue
// it was not attempted, with the time to try: the queue then waits without
// using up an attempt. The attempt that drew the 429 sent a request and is
// an ordinary failed attempt.
func TestAttemptHeldBackByTheRoutingKeyIsNotAttempted(t *testing.T) {
	start := time.Now().Add(time.Hour)
	f := clock.NewFake(start)
	pd := &windowPD{f: f, limit: 0, retryAfter: "30"}
	srv := httptest.NewServer(pd)
	defer srv.Close()
	a, b := fakeNotifier(t, f, srv), fakeNotifier(t, f, srv)
	ctx, cancel := context.WithDeadline(context.Background(), f.Now().Add(10*time.Second))
	defer cancel()
	retry, err := a.Notify(ctx, notify.NewMessage(notify.KindNotify, "team-a", "ga", nil, group(3, "P1", "a-"), start))
	if !retry || err == nil || errors.Is(err, notify.ErrNotAttempted) {
		t.Fatalf("retry %v err %v: want the 429 as a failed attempt", retry, err)
	}
	retry, err = b.Notify(ctx, notify.NewMessage(notify.KindNotify, "team-b", "gb", nil, group(3, "P0", "b-"), start))
	var se *notify.StatusError
	if !retry || !errors.Is(err, notify.ErrNotAttempted) || !errors.As(err, &se) || se.Wait(f.Now()) != 30*time.Second {
		t.Fatalf("retry %v err %v: want not attempted, to be tried after PagerDuty's 30s", retry, err)
	}
	if _, _, refused := pd.accepted(); refused != 1 {
		t.Fatalf("%d requests refused, want only the first receiver's", refused)
	}
}

// The bucket keeps every minute within the limit, however the events of
// P0 and lesser alerts mix.
func TestPacerKeepsEveryMinuteWithinTheLimit(t *testing.T) {
	p := &pacer{}
	p.setLimit(120)
	now := time.Unix(0, 0)
	var slots []time.Time
	for i := range 1000 {
		slot, ok := p.reserve(now, time.Time{}, i%7 == 0)
		if !ok || slot.Before(now) {
			t.Fatalf("event %d: slot %s before now %s (ok %v)", i, slot, now, ok)
		}
		slots = append(slots, slot)
		now = slot
	}
	for i := range slots {
		in := 0
		for j := i; j < len(slots) && slots[j].Sub(slots[i]) < time.Minute; j++ {
			in++
		}
		if in > 120 {
			t.Fatalf("%d events in the minute from event %d, PagerDuty allows 120", in, i)
		}
	}
	if d := slots[len(slots)-1].Sub(slots[0]); d > 10*time.Minute {
		t.Fatalf("1000 events took %s, want about 9 minutes at 100 a minute after the burst", d)
	}
}
