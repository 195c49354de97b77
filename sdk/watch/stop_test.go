package watch

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"governor.dev/governor/sdk/clock"
)

// heldStops holds the watcher's stops of a watch until released, as a
// server that cannot answer the deletion of the watch's consumer would, and
// tells when each starts and how it ends.
type heldStops struct {
	started chan struct{}
	release chan struct{}
	once    sync.Once
	ended   chan error
}

// free releases the stops held and those to come.
func (h *heldStops) free() { h.once.Do(func() { close(h.release) }) }

func holdStops(w *Watcher) *heldStops {
	h := &heldStops{started: make(chan struct{}, 8), release: make(chan struct{}), ended: make(chan error, 8)}
	w.stop = func(kw jetstream.KeyWatcher) error {
		h.started <- struct{}{}
		<-h.release
		err := kw.Stop()
		h.ended <- err
		return err
	}
	return h
}

// cutWatcher starts, through a proxy to the NATS at u, a watcher of
// checkout on a fresh bucket holding v1, waits for its ACK and cuts the
// proxy. It returns the watcher's held stops, the canceling of its Run, the
// channel closed when Run returns, and its connection.
func cutWatcher(t *testing.T, ctx context.Context, u string, opts Options) (*heldStops, context.CancelFunc, <-chan struct{}, *nats.Conn) {
	t.Helper()
	names, ctl, kv := machineBucket(t, ctx, u, "s")
	reports := reportsOf(t, ctl, names.ReportSubject("checkout"))
	_ = ctl.Flush()
	if _, err := kv.Put(ctx, names.StableKey("checkout"), envelopeBytes(t, "checkout", 1)); err != nil {
		t.Fatal(err)
	}
	p, nc, disconnected := proxiedConn(t, u)
	opts.Service, opts.Instance, opts.Conn, opts.Names, opts.Applier = "checkout", "pod-0", nc, names, &fakeApplier{}
	w, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	held := holdStops(w)
	wctx, wcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(wctx) }()
	t.Cleanup(func() { wcancel(); <-done })
	t.Cleanup(held.free) // first: a Run stuck in a stop ends
	awaitACK(t, ctx, reports, 1)
	// The server deletes the watch's consumer by itself once its
	// subscription is gone, as it is when NATS is down: the consumer has an
	// inactive threshold.
	js, _ := jetstream.New(ctl)
	s, err := js.Stream(ctx, "KV_"+names.Bucket())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	cl := s.ListConsumers(ctx)
	for ci := range cl.Info() {
		n++
		if ci.Config.InactiveThreshold <= 0 {
			t.Fatalf("consumer %s without inactive threshold: the server would keep it", ci.Name)
		}
	}
	if err := cl.Err(); err != nil || n != 1 {
		t.Fatalf("%d consumers of the bucket (%v), want the watch's one", n, err)
	}
	p.cut()
	select {
	case <-disconnected:
	case <-ctx.Done():
		t.Fatal("the watcher's connection did not notice the outage")
	}
	return held, wcancel, done, nc
}

// TestRunEndsWithoutWaitingForADeadServer: stopping a watcher whose NATS is
// down does not wait for the server to delete the watch's consumer (an
// answer that cannot come: nats.go waited 5s for it); the stop ends when
// the connection is closed.
func TestRunEndsWithoutWaitingForADeadServer(t *testing.T) {
	u := natsURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	held, wcancel, done, nc := cutWatcher(t, ctx, u, Options{Heartbeat: time.Hour, Resync: time.Hour})
	wcancel()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("Run waits for the stop of the watch, which waits for the dead server")
	}
	select {
	case <-held.started:
	case <-ctx.Done():
		t.Fatal("the watch is never stopped")
	}
	held.free()
	nc.Close()
	select {
	case err := <-held.ended:
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
			t.Fatalf("the stop ended by its timeout (%v), not with the connection", err)
		}
	case <-ctx.Done():
		t.Fatal("the stop of the watch outlives the connection")
	}
}

// TestWatchIsEstablishedAgainWithoutWaitingForADeadServer: a watch ended
// while NATS is down (its resync failed) is established again at once, not
// after the server failed to answer the deletion of its consumer.
func TestWatchIsEstablishedAgainWithoutWaitingForADeadServer(t *testing.T) {
	u := natsURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clk := clock.NewFake(time.Unix(1000, 0))
	errs := make(chan error, 64)
	held, _, _, _ := cutWatcher(t, ctx, u, Options{Clock: clk, Heartbeat: 24 * time.Hour, Resync: time.Minute,
		RequestTimeout: 50 * time.Millisecond, OnError: func(err error) {
			select {
			case errs <- err:
			default:
			}
		}})
	defer held.free()
	clk.Advance(time.Minute) // the resync, which fails and ends the watch
	for _, what := range []string{"resync", "watch"} {
		select {
		case err := <-errs:
			if strings.Contains(err.Error(), "resync") != (what == "resync") {
				t.Fatalf("error %v, want one of the %s", err, what)
			}
		case <-ctx.Done():
			t.Fatalf("no %s error: the watcher waits for the stop of the watch", what)
		}
	}
}
