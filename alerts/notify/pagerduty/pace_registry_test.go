package pagerduty

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/sdk/clock"
)

// limitNotifier is fakeNotifier with a configured events_per_minute.
func limitNotifier(t *testing.T, f *clock.Fake, srv *httptest.Server, key string, perMinute int) *Notifier {
	t.Helper()
	n, err := New(Config{RoutingKey: key, URL: srv.URL, EventsPerMinute: perMinute}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	n.clock = f
	n.sleep = func(_ context.Context, d time.Duration) error { f.Advance(d); return nil }
	return n
}

func registered(url, key string) bool {
	pacers.Lock()
	defer pacers.Unlock()
	_, ok := pacers.m[url+"\x00"+key]
	return ok
}

// A configuration that is built but never applied (a later receiver or
// the rules fail to build) leaves the routing key's pacing as it was: a
// built notifier with a higher events_per_minute does not raise the limit
// the live receivers are paced at.
func TestBuildingANotifierLeavesTheKeysPacingAlone(t *testing.T) {
	start := time.Now().Add(time.Hour)
	f := clock.NewFake(start)
	pd := &windowPD{f: f, limit: 60}
	srv := httptest.NewServer(pd)
	defer srv.Close()
	live := limitNotifier(t, f, srv, "rk", 60)
	if failed := deliver(t, f, live, notify.NewMessage(notify.KindNotify, "pd", "g0", nil, group(1, "P2", "w-"), start)); failed != 0 {
		t.Fatalf("%d failed attempts", failed)
	}
	_ = limitNotifier(t, f, srv, "rk", 600) // built, never used
	if failed := deliver(t, f, live, notify.NewMessage(notify.KindNotify, "pd", "g", nil, group(200, "P2", "a-"), start)); failed != 0 {
		t.Errorf("%d attempts failed without progress, want 0", failed)
	}
	if _, _, refused := pd.accepted(); refused != 0 {
		t.Fatalf("PagerDuty refused %d events: the unused notifier's 600 a minute paced the key", refused)
	}
}

// Two receivers that name one routing key with different
// events_per_minute are both paced at the lower: PagerDuty limits the
// key, whichever receiver sends.
func TestLowestLimitOfTheReceiversOfAKeyApplies(t *testing.T) {
	start := time.Now().Add(time.Hour)
	f := clock.NewFake(start)
	pd := &windowPD{f: f, limit: 60}
	srv := httptest.NewServer(pd)
	defer srv.Close()
	slow, fast := limitNotifier(t, f, srv, "rk", 60), limitNotifier(t, f, srv, "rk", 120)
	if failed := deliver(t, f, slow, notify.NewMessage(notify.KindNotify, "slow", "g0", nil, group(1, "P2", "w-"), start)); failed != 0 {
		t.Fatalf("%d failed attempts", failed)
	}
	if failed := deliver(t, f, fast, notify.NewMessage(notify.KindNotify, "fast", "g", nil, group(200, "P2", "a-"), start)); failed != 0 {
		t.Errorf("%d attempts failed without progress, want 0", failed)
	}
	if _, _, refused := pd.accepted(); refused != 0 {
		t.Fatalf("PagerDuty refused %d events: the key was paced above the lower limit", refused)
	}
	// Once the receiver with the lower limit is gone, the other's applies.
	slow.Close()
	pd.mu.Lock()
	pd.limit = 120
	pd.mu.Unlock()
	f.Advance(time.Minute)
	fast.pacer().mu.Lock()
	perMinute := fast.pacer().perMinute
	fast.pacer().mu.Unlock()
	if perMinute != 120 {
		t.Fatalf("key paced at %d a minute after the 60 receiver closed, want 120", perMinute)
	}
}

// The bucket of a routing key no receiver uses any more (a rotated key,
// a removed receiver) leaves the process once it has refilled: the
// registry does not grow with every rotation.
func TestBucketOfARetiredRoutingKeyIsForgotten(t *testing.T) {
	start := time.Now().Add(time.Hour)
	f := clock.NewFake(start)
	pd := &windowPD{f: f, limit: 120}
	srv := httptest.NewServer(pd)
	defer srv.Close()
	keys := []string{"key-1", "key-2", "key-3"}
	for i, key := range keys {
		n := limitNotifier(t, f, srv, key, 0)
		if failed := deliver(t, f, n, notify.NewMessage(notify.KindNotify, "pd", "g", nil, group(30, "P2", "a-"), start)); failed != 0 {
			t.Fatalf("%d failed attempts", failed)
		}
		n.Close()
		f.Advance(time.Minute)
		if i > 0 && registered(srv.URL, keys[i-1]) {
			t.Fatalf("bucket of the rotated %s still held after %s came in", keys[i-1], key)
		}
	}
}

// A reload replaces the notifiers of a key while PagerDuty's Retry-After
// holds it: the new notifier still waits for it.
func TestRetryAfterOfAKeyOutlivesAReload(t *testing.T) {
	start := time.Now().Add(time.Hour)
	f := clock.NewFake(start)
	pd := &windowPD{f: f, limit: 0, retryAfter: "30"}
	srv := httptest.NewServer(pd)
	defer srv.Close()
	old := limitNotifier(t, f, srv, "rk", 0)
	ctx, cancel := context.WithDeadline(context.Background(), f.Now().Add(10*time.Second))
	defer cancel()
	if retry, err := old.Notify(ctx, notify.NewMessage(notify.KindNotify, "pd", "g", nil, group(3, "P0", "a-"), start)); !retry || err == nil {
		t.Fatalf("retry %v err %v: want the 429", retry, err)
	}
	old.Close()
	reloaded := limitNotifier(t, f, srv, "rk", 0)
	retry, err := reloaded.Notify(ctx, notify.NewMessage(notify.KindNotify, "pd", "g", nil, group(3, "P0", "a-"), start))
	var se *notify.StatusError
	if !retry || !errors.Is(err, notify.ErrNotAttempted) || !errors.As(err, &se) || se.Wait(f.Now()) != 30*time.Second {
		t.Fatalf("retry %v err %v: want held back for PagerDuty's 30s", retry, err)
	}
}
