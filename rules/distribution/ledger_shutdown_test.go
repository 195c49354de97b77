package distribution

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"governor.dev/governor/sdk/watch"
)

// gatedStore holds the first instance read until release is closed, and
// honours its context as a database does: a call whose context ended
// fails.
type gatedStore struct {
	LedgerStore
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (s *gatedStore) Instance(ctx context.Context, service, instance string) (Instance, bool, error) {
	s.once.Do(func() { close(s.entered); <-s.release })
	if err := ctx.Err(); err != nil {
		return Instance{}, false, err
	}
	return s.LedgerStore.Instance(ctx, service, instance)
}

func (s *gatedStore) SaveInstance(ctx context.Context, prev *Instance, in Instance, tr *Transition) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.LedgerStore.SaveInstance(ctx, prev, in, tr)
}

// TestLedgerShutdownRecordsTheMessagesItTook: a ledger told to stop
// finishes the batch it is recording (a database call is not cut short by
// the shutdown) and records the messages the server had already sent it,
// rather than dropping them with its buffer.
func TestLedgerShutdownRecordsTheMessagesItTook(t *testing.T) {
	srv := embedded(t)
	names := uniqueNames(t)
	nc := connect(t, srv.URL())
	pub := connect(t, srv.URL())
	mem := NewMemoryStore()
	store := &gatedStore{LedgerStore: mem, entered: make(chan struct{}), release: make(chan struct{})}
	l, err := NewLedger(LedgerOptions{Store: store, Names: names, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Run(ctx, nc) }()
	beat := func(instance string) {
		t.Helper()
		b, _ := json.Marshal(watch.Heartbeat{Service: "checkout", Instance: instance, Running: 1, At: time.Now()})
		if err := pub.Publish(names.HeartbeatSubject("checkout"), b); err != nil {
			t.Fatal(err)
		}
		_ = pub.Flush()
	}
	// pod-0's heartbeat is being recorded (its store read is held) ...
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
wait:
	for {
		beat("pod-0")
		select {
		case <-store.entered:
			break wait
		case <-tick.C:
		case <-deadline:
			t.Fatal("the ledger never recorded a heartbeat")
		}
	}
	// ... and two more reached this replica when it is told to stop.
	beat("pod-1")
	beat("pod-2")
	cancel()
	close(store.release)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
	}
	for _, inst := range []string{"pod-0", "pod-1", "pod-2"} {
		if _, ok, _ := mem.Instance(context.Background(), "checkout", inst); !ok {
			t.Errorf("%s was not recorded: the ledger dropped a message it had taken at shutdown", inst)
		}
	}
}

// TestLedgerStopsWhileNATSIsDown: a ledger told to stop while its
// connection is down does not wait for the connection to drain its
// subscriptions.
func TestLedgerStopsWhileNATSIsDown(t *testing.T) {
	srv := embedded(t)
	nc := connect(t, srv.URL())
	l, err := NewLedger(LedgerOptions{Store: NewMemoryStore(), Names: uniqueNames(t), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Run(ctx, nc) }()
	_ = nc.Flush()
	down := nc.StatusChanged(nats.RECONNECTING)
	srv.Stop()
	select {
	case <-down:
	case <-time.After(20 * time.Second):
		t.Fatal("the connection did not notice the outage")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return while NATS was down")
	}
}
