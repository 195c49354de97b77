package watch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"governor.dev/governor/sdk/clock"
)

// An instance runs the stable version or the version of a canary that
// selects it, nothing else: when a new canary record replaces the one it
// runs, it moves to the new canary if that one selects it, else back to the
// stable version, and says so with an ACK.
func TestReplacedCanaryLeavesOnlyTheVersionStagedForTheInstance(t *testing.T) {
	zoneA := Selector{Labels: map[string]string{"zone": "a"}}
	zoneB := Selector{Labels: map[string]string{"zone": "b"}}
	tests := []struct {
		name    string
		running Selector // canary v3 the instance runs (zero: none, it runs the stable v1)
		next    []byte   // the canary record that replaces it
		want    int64
		applied []int64
	}{
		{"replaced by a canary for other instances", zoneA, canaryBytes(t, 4, zoneB), 1, []int64{1, 3, 1}},
		{"replaced by a newer canary that selects it", zoneA, canaryBytes(t, 4, zoneA), 4, []int64{1, 3, 4}},
		{"replaced by an older canary that selects it", zoneA, canaryBytes(t, 2, zoneA), 2, []int64{1, 3, 2}},
		{"on stable, a canary for others replaced by another", zoneB, canaryBytes(t, 4, zoneB), 1, []int64{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, app, reports, _ := newTestState(t, "checkout", "i-1", map[string]string{"zone": "a"})
			s.onStable(envelopeBytes(t, "checkout", 1))
			s.onCanary(canaryBytes(t, 3, tt.running))
			s.onCanary(tt.next)
			if got := s.running.Load(); got != tt.want {
				t.Fatalf("running v%d, want v%d", got, tt.want)
			}
			if got := app.versions(); !slices.Equal(got, tt.applied) {
				t.Fatalf("applied %v, want %v", got, tt.applied)
			}
			last := (*reports)[len(*reports)-1]
			if last.Status != StatusACK || last.Version != tt.want || last.Running != tt.want {
				t.Fatalf("last report %+v, want ACK of v%d running v%d", last, tt.want, tt.want)
			}
		})
	}
}

// A canary version restored from the cache at start is kept while a canary
// that selects the instance holds it, and left for the stable version once
// the canary key shows otherwise: deleted, replaced by a canary for other
// instances, or without any entry when the initial values end. The order in
// which the initial values arrive does not matter.
func TestCachedCanaryIsKeptOnlyWhileStagedForTheInstance(t *testing.T) {
	stable := envelopeBytes(t, "checkout", 1)
	stagedA := canaryBytes(t, 2, Selector{Labels: map[string]string{"zone": "a"}})
	replacedB := canaryBytes(t, 3, Selector{Labels: map[string]string{"zone": "b"}})
	staged, err := DecodeCanary(stagedA)
	if err != nil {
		t.Fatal(err)
	}
	cached := mustJSON(t, staged.Envelope) // what the first run applied and cached
	tests := []struct {
		name    string
		initial func(s *state) // the watch's initial values, then their end
		want    int64
	}{
		{"canary deleted", func(s *state) {
			s.onStable(stable)
			s.onCanaryGone()
			s.settle()
		}, 1},
		{"canary key without any entry", func(s *state) {
			s.onStable(stable)
			s.settle()
		}, 1},
		{"canary replaced by one for other instances", func(s *state) {
			s.onStable(stable)
			s.onCanary(replacedB)
			s.settle()
		}, 1},
		{"canary still selects the instance", func(s *state) {
			s.onStable(stable)
			s.onCanary(stagedA)
			s.settle()
		}, 2},
		{"canary still selects the instance, delivered before the stable value", func(s *state) {
			s.onCanary(stagedA)
			s.onStable(stable)
			s.settle()
		}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, app, _, _ := newTestState(t, "checkout", "i-1", map[string]string{"zone": "a"})
			s.cachePath = filepath.Join(t.TempDir(), "rules.json")
			if err := SaveCache(s.cachePath, cached); err != nil {
				t.Fatal(err)
			}
			s.loadCache()
			tt.initial(s)
			if got := s.running.Load(); got != tt.want {
				t.Fatalf("running v%d, want v%d", got, tt.want)
			}
			want := []int64{2} // the cached version alone: no detour
			if tt.want != 2 {
				want = append(want, tt.want)
			}
			if got := app.versions(); !slices.Equal(got, want) {
				t.Fatalf("applied %v, want %v", got, want)
			}
			if env, err := LoadCache(s.cachePath, "checkout"); err != nil || env.Version != tt.want {
				t.Fatalf("cache %v %v, want v%d", env, err, tt.want)
			}
		})
	}
}

// An instance restarted while the canary it ran was aborted or replaced by
// one for other instances comes back on the stable version once the watch
// delivers the keys (not only at a resync), and ACKs it. So does one whose
// cache holds a version above the stable one and whose bucket holds no
// canary entry at all (a recreated bucket).
func TestRestartedInstanceReturnsFromACanaryThatIsNoLongerStaged(t *testing.T) {
	u := natsURL(t)
	zoneA := Selector{Labels: map[string]string{"zone": "a"}}
	tests := []struct {
		name      string
		ranCanary bool // the first run applies canary v2 (zone a) and caches it
		whileDown func(ctx context.Context, kv jetstream.KeyValue, names Names) error
	}{
		{"canary aborted", true, func(ctx context.Context, kv jetstream.KeyValue, names Names) error {
			return kv.Delete(ctx, names.CanaryKey("checkout"))
		}},
		{"canary replaced by one for zone b", true, func(ctx context.Context, kv jetstream.KeyValue, names Names) error {
			_, err := kv.Put(ctx, names.CanaryKey("checkout"), canaryBytes(t, 3, Selector{Labels: map[string]string{"zone": "b"}}))
			return err
		}},
		{"no canary entry at all", false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var b [5]byte
			_, _ = rand.Read(b[:])
			names, _ := NewNames("r" + hex.EncodeToString(b[:]))
			nc, err := Connect(u)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			js, _ := jetstream.New(nc)
			kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: names.Bucket(), Storage: jetstream.MemoryStorage, History: 5})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = js.DeleteKeyValue(context.Background(), names.Bucket()) }()
			reports := reportsOf(t, nc, names.ReportSubject("checkout"))
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			next := func(what string) *Report {
				t.Helper()
				select {
				case r := <-reports:
					return r
				case <-ctx.Done():
					t.Fatalf("no report: %s", what)
					return nil
				}
			}

			if _, err := kv.Put(ctx, names.StableKey("checkout"), envelopeBytes(t, "checkout", 1)); err != nil {
				t.Fatal(err)
			}
			cache := filepath.Join(t.TempDir(), "rules.json")
			// A resync an hour away: the watch alone must bring the instance back.
			start := func() (*Watcher, func()) {
				w, err := New(Options{Service: "checkout", Instance: "pod-0", Labels: map[string]string{"zone": "a"},
					Conn: nc, Names: names, Applier: &fakeApplier{}, CacheFile: cache, Resync: time.Hour})
				if err != nil {
					t.Fatal(err)
				}
				wctx, wcancel := context.WithCancel(ctx)
				done := make(chan struct{})
				go func() { defer close(done); _ = w.Run(wctx) }()
				return w, func() { wcancel(); <-done }
			}

			if tt.ranCanary {
				if _, err := kv.Put(ctx, names.CanaryKey("checkout"), canaryBytes(t, 2, zoneA)); err != nil {
					t.Fatal(err)
				}
				_, stop := start()
				if r := next("ACK of v1"); r.Status != StatusACK || r.Version != 1 {
					t.Fatalf("report %+v, want ACK of v1", r)
				}
				if r := next("ACK of the canary"); r.Status != StatusACK || r.Version != 2 {
					t.Fatalf("report %+v, want ACK of the canary v2", r)
				}
				stop()
				if err := tt.whileDown(ctx, kv, names); err != nil {
					t.Fatal(err)
				}
			} else if err := SaveCache(cache, envelopeBytes(t, "checkout", 2)); err != nil {
				t.Fatal(err)
			}

			w, stop := start()
			defer stop()
			if r := next("ACK of the return to v1"); r.Status != StatusACK || r.Version != 1 || r.Running != 1 {
				t.Fatalf("report %+v, want ACK of v1 running v1", r)
			}
			if w.Running() != 1 {
				t.Fatalf("running v%d, want v1", w.Running())
			}
			if env, err := LoadCache(cache, "checkout"); err != nil || env.Version != 1 {
				t.Fatalf("cache %v %v, want v1", env, err)
			}
		})
	}
}

// TestRewatchWithoutACanaryEntryLeavesTheCanary: a re-watch whose initial
// values hold no entry of the canary key (NATS restarted and lost the
// bucket, which the control plane recreated with the stable version) means
// there is no canary. The instance kept the canary record of the previous
// watch and ran the canary version until the next resync (with Resync at an
// hour, for an hour); now it returns to the stable version at once, and
// takes the canary again if the same record is delivered after all.
func TestRewatchWithoutACanaryEntryLeavesTheCanary(t *testing.T) {
	zoneA := Selector{Labels: map[string]string{"zone": "a"}}
	s, app, _, _ := newTestState(t, "checkout", "i-1", map[string]string{"zone": "a"})
	clk := clock.NewFake(time.Unix(1000, 0))
	w := &Watcher{st: s, opts: Options{Service: "checkout", Clock: clk, Resync: time.Hour, Heartbeat: time.Hour}}
	// follow handles the entries, then the watch ends.
	follow := func(entries ...jetstream.KeyValueEntry) {
		t.Helper()
		kw := fakeKeyWatcher{ch: make(chan jetstream.KeyValueEntry, len(entries))}
		for _, e := range entries {
			kw.ch <- e
		}
		close(kw.ch)
		hb := clk.NewTimer(time.Hour)
		w.follow(context.Background(), nil, kw, make(chan nats.Status), &hb)
	}
	at := time.Unix(100, 0)
	stable := fakeEntry{key: "checkout.stable", value: envelopeBytes(t, "checkout", 1), rev: 1, at: at}
	canary := fakeEntry{key: "checkout.canary", value: canaryBytes(t, 2, zoneA), rev: 2, at: at.Add(time.Second)}
	follow(stable, canary, nil)
	if s.running.Load() != 2 {
		t.Fatalf("running v%d, want the canary v2", s.running.Load())
	}
	follow(stable, canary, nil) // a re-watch of the same bucket
	if got := app.versions(); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("applied %v after a re-watch with the canary still there, want [1 2]", got)
	}
	recreated := fakeEntry{key: "checkout.stable", value: envelopeBytes(t, "checkout", 1), rev: 1, at: at.Add(time.Hour)}
	follow(recreated, nil)
	if s.running.Load() != 1 {
		t.Fatalf("running v%d after a watch that showed no canary entry, want the stable v1", s.running.Load())
	}
	follow(nil, canary) // the record after all (its initial values came late)
	if got := app.versions(); s.running.Load() != 2 || !slices.Equal(got, []int64{1, 2, 1, 2}) {
		t.Fatalf("running v%d, applied %v; want the canary v2 again", s.running.Load(), got)
	}
}
