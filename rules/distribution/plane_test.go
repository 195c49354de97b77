package distribution

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"governor.dev/governor/rules/versioning"
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
