package notify

import (
	"context"
	"sync"
	"testing"
	"time"

	"governor.dev/governor/sdk/clock"
)

// closing counts its Close calls and the Notify calls made after one.
type closing struct {
	mu           sync.Mutex
	closes, late int
}

func (c *closing) Notify(context.Context, *Message) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closes > 0 {
		c.late++
	}
	return false, nil
}

func (c *closing) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closes++
}

// A queue that stops, retired after its last message or closed, closes
// its notifier once, after the notifier's last Notify: PagerDuty's
// notifier then leaves its routing key's bucket.
func TestStoppedQueueClosesItsNotifierOnce(t *testing.T) {
	for _, retire := range []bool{true, false} {
		c := &closing{}
		q := NewQueue("pd", c, QueueOptions{Clock: clock.NewFake(time.Unix(0, 0)), Metrics: NewMetrics(nil)})
		q.Enqueue(&Message{GroupKey: "g"})
		if err := q.Idle(context.Background()); err != nil {
			t.Fatal(err)
		}
		if retire {
			<-q.Retire()
		}
		q.Close()
		q.Close()
		c.mu.Lock()
		if c.closes != 1 || c.late != 0 {
			t.Errorf("retire %v: closed %d times, %d Notify calls after, want once and none", retire, c.closes, c.late)
		}
		c.mu.Unlock()
	}
}
