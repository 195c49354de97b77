package distribution

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/watch"
)

func TestPlaneStagesThroughTheRelayAndRollsOut(t *testing.T) {
	url := embedded(t).URL()
	ctx, cancel := context.WithCancel(context.Background())
	names := uniqueNames(t)
	outbox := NewMemoryOutbox(nil)
	staged := watch.Selector{Labels: map[string]string{"zone": "a"}}
	plane, err := NewPlane(ctx, PlaneOptions{Conn: connect(t, url), Names: names, Outbox: outbox, Store: NewMemoryStore(),
		Stage: func(_ context.Context, it versioning.OutboxItem) (*watch.Selector, error) {
			if it.Version >= 2 {
				return &staged, nil
			}
			return nil, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = plane.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		js, _ := jetstream.New(connect(t, url))
		_ = js.DeleteKeyValue(context.Background(), names.Bucket())
	})

	a := startSDK(t, url, names, "checkout", sdkOpts{instance: "pod-a", labels: map[string]string{"zone": "a"}, back: true})
	b := startSDK(t, url, names, "checkout", sdkOpts{instance: "pod-b", labels: map[string]string{"zone": "b"}})
	for _, v := range []int64{1, 2} {
		if _, err := outbox.Add(envelope(t, "checkout", v)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "pod-a on the staged v2", func() bool { return a.w.Running() == 2 })
	eventually(t, "pod-b stays on v1", func() bool { return b.w.Running() == 1 })
	if b.app.last() != 1 {
		t.Fatalf("pod-b applied v%d", b.app.last())
	}
	synced := func(want map[string]int64) func() bool {
		return func() bool {
			ins, _ := plane.Ledger().Instances(ctx, "checkout")
			for _, in := range ins {
				if in.State != StateSynced || in.Target != want[in.Instance] {
					return false
				}
			}
			return len(ins) == len(want)
		}
	}
	eventually(t, "ledger: a on v2, b on v1", synced(map[string]int64{"pod-a": 2, "pod-b": 1}))

	if _, err := plane.Promote(ctx, "checkout"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "everyone on v2", func() bool { return a.w.Running() == 2 && b.w.Running() == 2 })
	eventually(t, "ledger: everyone on v2", synced(map[string]int64{"pod-a": 2, "pod-b": 2}))

	payload, _ := json.Marshal(envelope(t, "checkout", 3))
	if _, err := plane.StartCanary(ctx, payload, staged); err != nil {
		t.Fatal(err)
	}
	eventually(t, "pod-a on canary v3", func() bool { return a.w.Running() == 3 })
	if _, err := plane.Abort(ctx, "checkout"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "pod-a back on v2", func() bool { return a.w.Running() == 2 })
	eventually(t, "ledger: everyone on v2 after the abort", synced(map[string]int64{"pod-a": 2, "pod-b": 2}))
	if got := fmt.Sprint(b.app.versions()); got != "[1 2]" {
		t.Fatalf("pod-b applied %s, want [1 2]", got)
	}

	// The paths a person takes (the UI): the version they looked at, and a
	// running canary moved to other instances; the ledger follows each.
	payload, _ = json.Marshal(envelope(t, "checkout", 4))
	if _, err := plane.StartCanary(ctx, payload, staged); err != nil {
		t.Fatal(err)
	}
	eventually(t, "ledger: a on canary v4", synced(map[string]int64{"pod-a": 4, "pod-b": 2}))
	if _, err := plane.SetCanarySelector(ctx, "checkout", 4, watch.Selector{Labels: map[string]string{"zone": "b"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "pod-b on canary v4, pod-a back on v2", func() bool { return a.w.Running() == 2 && b.w.Running() == 4 })
	eventually(t, "ledger: b on canary v4", synced(map[string]int64{"pod-a": 2, "pod-b": 4}))
	if _, err := plane.AbortVersion(ctx, "checkout", 3); !errors.Is(err, ErrStale) {
		t.Fatalf("abort of v3 while v4 is staged: %v, want ErrStale", err)
	}
	if _, err := plane.PromoteVersion(ctx, "checkout", 4); err != nil {
		t.Fatal(err)
	}
	eventually(t, "ledger: everyone on v4", synced(map[string]int64{"pod-a": 4, "pod-b": 4}))
}

func TestNewPlaneRefusesMissingParts(t *testing.T) {
	if _, err := NewPlane(context.Background(), PlaneOptions{}); err == nil {
		t.Fatal("accepted")
	}
}

// TestLedgerSweepCatchesUpWithACanaryItMissed: the Plane changes the bucket
// first and tells the ledger second. When the ledger's write fails (the
// rules database restarting), the operator sees the error, but retrying
// cannot help: an abort retried finds no canary, a canary staged again is
// refused as stale. The next sweep compares the recorded canary with the
// bucket's: an aborted canary is withdrawn from the target and a staged one
// added, so the instances are judged against what they were sent (SYNCED),
// not a canary gone or unknown (STALE).
func TestLedgerSweepCatchesUpWithACanaryItMissed(t *testing.T) {
	ctx := context.Background()
	url := embedded(t).URL()
	names := uniqueNames(t)
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	store := &flakyLedgerStore{MemoryStore: NewMemoryStore()}
	plane, err := NewPlane(ctx, PlaneOptions{Conn: connect(t, url), Names: names, Outbox: NewMemoryOutbox(clk),
		Store: store, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		js, _ := jetstream.New(connect(t, url))
		_ = js.DeleteKeyValue(context.Background(), names.Bucket())
	})
	l := plane.Ledger()
	heartbeat := func(running int64) {
		t.Helper()
		if err := l.HandleHeartbeat(ctx, &watch.Heartbeat{Service: "checkout", Instance: "pod-a", Running: running,
			IntervalMS: 1000, Labels: map[string]string{"zone": "a"}}); err != nil {
			t.Fatal(err)
		}
	}
	payload := func(v int64) []byte {
		b, err := json.Marshal(envelope(t, "checkout", v))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	sweptTo := func(step string, want int64) {
		t.Helper()
		clk.Advance(time.Minute) // past the grace period: behind would be STALE
		heartbeat(want)
		if err := l.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		in, _, _ := store.Instance(ctx, "checkout", "pod-a")
		if in.State != StateSynced || in.Target != want {
			t.Fatalf("%s: pod-a runs v%d, but the ledger says %s for v%d", step, want, in.State, in.Target)
		}
	}
	_, env, err := plane.Publisher().Publish(ctx, payload(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Published(ctx, env, nil); err != nil {
		t.Fatal(err)
	}
	zoneA := watch.Selector{Labels: map[string]string{"zone": "a"}}
	if _, err := plane.StartCanary(ctx, payload(2), zoneA); err != nil {
		t.Fatal(err)
	}
	heartbeat(2)

	store.setFail(true)
	if _, err := plane.Abort(ctx, "checkout"); err == nil {
		t.Fatal("abort with the ledger failing: want its error")
	}
	store.setFail(false)
	sweptTo("after an abort the ledger missed", 1)

	store.setFail(true)
	if _, err := plane.StartCanary(ctx, payload(3), zoneA); err == nil {
		t.Fatal("canary with the ledger failing: want its error")
	}
	store.setFail(false)
	sweptTo("after a canary the ledger missed", 3)
	if tg, _, _ := store.Target(ctx, "checkout"); tg.Canary != 3 || tg.Selector == nil || tg.Selector.Labels["zone"] != "a" {
		t.Fatalf("target %+v, want canary v3 on zone a", tg)
	}
}

// deleteHookKV runs then once, right after the first successful Delete.
type deleteHookKV struct {
	jetstream.KeyValue
	then func()
}

func (h *deleteHookKV) Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	err := h.KeyValue.Delete(ctx, key, opts...)
	if err == nil && h.then != nil {
		f := h.then
		h.then = nil
		f()
	}
	return err
}

// An abort tells the ledger after the bucket: a newer canary staged in
// between (by the relay or a person) stays the ledger's canary, as it stays
// the bucket's.
func TestPlaneAbortKeepsTheCanaryStagedMeanwhileInTheLedger(t *testing.T) {
	ctx := context.Background()
	url := embedded(t).URL()
	names := uniqueNames(t)
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	store := NewMemoryStore()
	plane, err := NewPlane(ctx, PlaneOptions{Conn: connect(t, url), Names: names, Outbox: NewMemoryOutbox(clk),
		Store: store, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		js, _ := jetstream.New(connect(t, url))
		_ = js.DeleteKeyValue(context.Background(), names.Bucket())
	})
	sel := watch.Selector{Percent: 50}
	if _, err := plane.StartCanary(ctx, payloadOf(t, "checkout", 2), sel); err != nil {
		t.Fatal(err)
	}
	plane.pub.kv = &deleteHookKV{KeyValue: plane.pub.kv, then: func() {
		if _, err := plane.StartCanary(ctx, payloadOf(t, "checkout", 3), sel); err != nil {
			t.Error(err)
		}
	}}
	if _, err := plane.AbortVersion(ctx, "checkout", 2); err != nil {
		t.Fatal(err)
	}
	if c := canaryVersion(t, plane.Publisher(), "checkout"); c != 3 {
		t.Fatalf("bucket canary v%d, want v3", c)
	}
	if tg, _, _ := store.Target(ctx, "checkout"); tg.Canary != 3 {
		t.Fatalf("ledger canary v%d after the abort of v2, want v3, which the bucket stages", tg.Canary)
	}
}
