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

// A paced event whose slot leaves the attempt too little time for its
// request is not sent in that attempt: the request would be cut by the
// deadline and use up one of the queue's attempts. The attempt reports
// notify.ErrNotAttempted with the slot, and the next attempt sends it.
func TestPacedEventTooCloseToTheDeadlineWaitsForTheNextAttempt(t *testing.T) {
	tests := []struct {
		name string
		// latency of PagerDuty's answers, in fake time
		latency time.Duration
		// warm sends one message before, so that the notifier has timed
		// a request
		warm bool
		slot time.Duration // after the attempt's start; deadline 10s
		sent bool
	}{
		{"slot 200ms before the deadline, no request timed yet", 0, false, 9800 * time.Millisecond, false},
		{"slot 2s before the deadline, requests of 3s", 3 * time.Second, true, 8 * time.Second, false},
		{"slot 2s before the deadline, fast requests", 0, true, 8 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now().Add(time.Hour)
			f := clock.NewFake(start)
			pd := &limitedPD{tokens: 100, onEvent: func(Event) { f.Advance(tt.latency) }}
			srv := httptest.NewServer(pd)
			defer srv.Close()
			// A key of its own: the buckets are process-wide, and the
			// Retry-After below must not reach another test whose server
			// gets this one's port.
			n, err := New(Config{RoutingKey: "rk-" + t.Name(), URL: srv.URL}, srv.Client())
			if err != nil {
				t.Fatal(err)
			}
			n.clock = f
			n.sleep = func(_ context.Context, d time.Duration) error { f.Advance(d); return nil }
			defer n.Close()
			if tt.warm {
				ctx, cancel := context.WithDeadline(context.Background(), f.Now().Add(10*time.Second))
				_, err := n.Notify(ctx, notify.NewMessage(notify.KindNotify, "pd", "warm", nil, firingGroup(1), f.Now()))
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				pd.refill(100)
			}
			// Another sender of the key drew a Retry-After: the key may
			// send again at the slot.
			now := f.Now()
			n.pacer().refused(now, tt.slot)
			ctx, cancel := context.WithDeadline(context.Background(), now.Add(10*time.Second))
			defer cancel()
			m := notify.NewMessage(notify.KindNotify, "pd", "k", nil, firingGroup(1), now)
			retry, err := n.Notify(ctx, m)
			got := len(pd.refill(100))
			if tt.sent {
				if err != nil || got != 1 {
					t.Fatalf("err %v, %d events sent: want the event sent at its slot", err, got)
				}
				return
			}
			var se *notify.StatusError
			if got != 0 || !retry || !errors.Is(err, notify.ErrNotAttempted) || !errors.As(err, &se) {
				t.Fatalf("retry %v, err %v, %d events sent: want no request and not attempted", retry, err, got)
			}
			if at := se.Wait(now); at != tt.slot {
				t.Fatalf("try again after %s, want the slot %s", at, tt.slot)
			}
			f.Set(now.Add(tt.slot))
			ctx2, cancel2 := context.WithDeadline(context.Background(), f.Now().Add(10*time.Second))
			defer cancel2()
			if _, err := n.Notify(ctx2, m); err != nil || len(pd.refill(100)) != 1 {
				t.Fatalf("next attempt: err %v: want the event sent", err)
			}
		})
	}
}
