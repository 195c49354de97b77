package app

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/engine/config"
	"governor.dev/governor/engine/evaluate"
	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/recommend"
	"governor.dev/governor/rules/versioning"
)

// fenceRecorder is a rules store that records the fence each read of the
// services list carries (the first call of the cycle on the store).
type fenceRecorder struct {
	versioning.Store
	mu     sync.Mutex
	fences []versioning.Fence
}

func (f *fenceRecorder) Services(ctx context.Context) ([]versioning.ServiceInfo, error) {
	fe, ok := versioning.FenceOf(ctx)
	f.mu.Lock()
	if ok {
		f.fences = append(f.fences, fe)
	}
	f.mu.Unlock()
	return f.Store.Services(ctx)
}

// TestACycleCallsTheRulesStoreUnderTheFenceOfItsTick: each evaluation
// cycle reaches the rules store with the fence of the tick it runs for and
// the replica's identity, so that the store refuses its writes once another
// replica claimed a later tick.
func TestACycleCallsTheRulesStoreUnderTheFenceOfItsTick(t *testing.T) {
	ctx := context.Background()
	cfg := config.Default()
	cfg.Listen, cfg.DataDir, cfg.Identity = "127.0.0.1:0", t.TempDir(), "engine-a"
	a, err := New(ctx, Options{Config: cfg, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	rec := &fenceRecorder{Store: a.store}
	tracker, err := loadscore.New(loadscore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := recommend.New(RecommendOptions(cfg.Recommend))
	if err != nil {
		t.Fatal(err)
	}
	if a.eval, err = evaluate.New(evaluate.Options{Reader: a.reader, Tracker: tracker, Recommender: r, Versions: rec,
		Registerer: prometheus.NewRegistry()}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	a.tick(ctx, t0)
	a.tick(ctx, t0.Add(cfg.Interval))
	want := []versioning.Fence{{Tick: t0, Holder: "engine-a"}, {Tick: t0.Add(cfg.Interval), Holder: "engine-a"}}
	if len(rec.fences) != len(want) || !rec.fences[0].Tick.Equal(want[0].Tick) || !rec.fences[1].Tick.Equal(want[1].Tick) ||
		rec.fences[0].Holder != "engine-a" || rec.fences[1].Holder != "engine-a" {
		t.Fatalf("fences %+v, want %+v", rec.fences, want)
	}
}
