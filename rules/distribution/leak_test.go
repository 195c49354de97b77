package distribution

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"governor.dev/governor/internal/natsembed"
	"governor.dev/governor/sdk/watch"
)

// TestStoppingLeavesNoGoroutines runs the whole path once, stops it, and
// checks that the relay, the ledger and the watchers all returned.
func TestStoppingLeavesNoGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv, err := natsembed.Start(natsembed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Close() }()
	ctx, cancel := context.WithCancel(context.Background())
	cp, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	outbox := NewMemoryOutbox(nil)
	plane, err := NewPlane(ctx, PlaneOptions{Conn: cp, Outbox: outbox, Store: NewMemoryStore()})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = plane.Run(ctx) }()

	nc, err := watch.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	app := &recorder{t: t}
	w, err := watch.New(watch.Options{Service: "checkout", Instance: "pod-0", Conn: nc, Applier: app,
		CacheFile: filepath.Join(t.TempDir(), "rules.json"), Heartbeat: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() { defer wg.Done(); _ = w.Run(ctx) }()
	if _, err := outbox.Add(envelope(t, "checkout", 1)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "v1 applied", func() bool { return app.last() == 1 })
	eventually(t, "v1 acknowledged", func() bool {
		in, _, _ := plane.Ledger().o.Store.Instance(ctx, "checkout", "pod-0")
		return in.AckVersion == 1
	})
	cancel()
	wg.Wait()
	nc.Close()
	cp.Close()
	_ = srv.Close()
}
