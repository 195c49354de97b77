package notify

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/sdk/clock"
)

// holding holds back the first attempt at each message named in hold
// (ErrNotAttempted, to try again after the duration), delivers every
// other attempt and reports the delivered IDs, in order, on delivered.
type holding struct {
	f         *clock.Fake
	hold      map[string]time.Duration
	delivered chan string
	mu        sync.Mutex
	tried     map[string]bool
}

func newHolding(f *clock.Fake, hold map[string]time.Duration) *holding {
	return &holding{f: f, hold: hold, delivered: make(chan string, 16), tried: map[string]bool{}}
}

func (h *holding) Notify(_ context.Context, m *Message) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if d, ok := h.hold[m.ID]; ok && !h.tried[m.ID] {
		h.tried[m.ID] = true
		return true, fmt.Errorf("held back: %w: %w", ErrNotAttempted, &StatusError{StatusCode: 429, RetryAt: h.f.Now().Add(d)})
	}
	h.delivered <- m.ID
	return false, nil
}

func alertMsg(id, group string, sev alerts.Severity, status string, names ...string) *Message {
	m := &Message{ID: id, Receiver: "pd", GroupKey: group, Severity: sev, Status: status}
	for _, n := range names {
		m.Alerts = append(m.Alerts, Alert{Alert: alerts.Alert{Labels: alerts.Labels{"alertname": n}},
			Status: status, Fingerprint: n})
	}
	return m
}

// An alert in two groups of one receiver (routes that continue): the
// resolve that one group sends must not reach the receiver before the
// trigger the other group queued first, however more urgent the resolve's
// message is. An unrelated page still goes while the trigger waits for its
// slot.
func TestResolveOfAnotherGroupWaitsForTheTriggerOfTheSameAlert(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	h := newHolding(f, map[string]time.Duration{"trigger-a": time.Minute})
	q := NewQueue("pd", h, QueueOptions{Clock: f})
	defer q.Close()
	q.Enqueue(alertMsg("trigger-a", "a", alerts.P2, StatusFiring, "X"))
	waitTimer(t, f)
	q.Enqueue(alertMsg("resolve-b", "b", alerts.P0, StatusResolved, "X", "Z"))
	q.Enqueue(alertMsg("other-c", "c", alerts.P0, StatusFiring, "Y"))
	var got []string
	for id := ""; id != "other-c"; {
		id = <-h.delivered
		got = append(got, id)
	}
	if slices.Contains(got, "resolve-b") {
		t.Fatalf("delivered %v: the resolve of X went out before its trigger", got)
	}
	waitTimer(t, f)
	f.Advance(time.Minute)
	got = append(got, <-h.delivered, <-h.delivered)
	if want := []string{"other-c", "trigger-a", "resolve-b"}; !slices.Equal(got, want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
}

// A queue that replaces a retired one holds back a message of a group or
// alert that the retired queue still holds, delivers the others meanwhile,
// and lets it go once the retired queue is done with its own: delivered,
// or abandoned by Close.
func TestReplacingQueueHoldsBackWhatMustFollowTheRetiredQueue(t *testing.T) {
	tests := []struct {
		name string
		end  func(f *clock.Fake, old *Queue)
		want []string
	}{
		{"retired queue delivers", func(f *clock.Fake, _ *Queue) { waitTimer(t, f); f.Advance(time.Minute) },
			[]string{"other", "trigger", "resolve"}},
		{"retired queue closed", func(_ *clock.Fake, old *Queue) { old.Close() }, []string{"other", "resolve"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := clock.NewFake(time.Unix(0, 0))
			h := newHolding(f, map[string]time.Duration{"trigger": time.Minute})
			old := NewQueue("pd", h, QueueOptions{Clock: f})
			defer old.Close()
			old.Enqueue(alertMsg("trigger", "g", alerts.P2, StatusFiring, "X"))
			waitTimer(t, f)
			old.Retire()
			cur := NewQueue("pd", h, QueueOptions{Clock: f, Replaces: []*Queue{old}})
			defer cur.Close()
			cur.Enqueue(alertMsg("resolve", "h", alerts.P0, StatusResolved, "X"))
			cur.Enqueue(alertMsg("other", "o", alerts.P2, StatusFiring, "Y"))
			got := []string{<-h.delivered}
			tt.end(f, old)
			for len(got) < len(tt.want) {
				got = append(got, <-h.delivered)
			}
			if err := cur.Idle(context.Background()); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("delivered %v, want %v", got, tt.want)
			}
		})
	}
}

// A message may hold an alert twice, its old episode resolved and its
// new one firing: it follows no one but earlier messages, itself not.
func TestMessageHoldingAnAlertTwiceIsDelivered(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	h := newHolding(f, nil)
	q := NewQueue("pd", h, QueueOptions{Clock: f})
	defer q.Close()
	m := alertMsg("flap", "g", alerts.P1, StatusResolved, "X")
	m.Alerts = append(m.Alerts, alertMsg("", "g", alerts.P1, StatusFiring, "X").Alerts...)
	q.Enqueue(m)
	if got := <-h.delivered; got != "flap" {
		t.Fatalf("delivered %s, want flap", got)
	}
}
