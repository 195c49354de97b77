package watch

import (
	"testing"

	"github.com/nats-io/nats.go"
)

// TestQueuedReconnectsAreAnsweredOnce: reconnects queued while one was
// handled are drained, so one re-watch and one heartbeat answer them all.
func TestQueuedReconnectsAreAnsweredOnce(t *testing.T) {
	ch := make(chan nats.Status, 10)
	for range 10 {
		ch <- nats.CONNECTED
	}
	<-ch
	drain(ch)
	if len(ch) != 0 {
		t.Fatalf("%d reconnects still queued after drain", len(ch))
	}
	drain(ch) // an empty channel does not block
}
