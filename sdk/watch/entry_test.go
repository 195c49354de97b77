package watch

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// fakeEntry is a jetstream.KeyValueEntry.
type fakeEntry struct {
	key   string
	value []byte
	rev   uint64
	at    time.Time
	op    jetstream.KeyValueOp
}

func (e fakeEntry) Bucket() string                  { return "b" }
func (e fakeEntry) Key() string                     { return e.key }
func (e fakeEntry) Value() []byte                   { return e.value }
func (e fakeEntry) Revision() uint64                { return e.rev }
func (e fakeEntry) Created() time.Time              { return e.at }
func (e fakeEntry) Delta() uint64                   { return 0 }
func (e fakeEntry) Operation() jetstream.KeyValueOp { return e.op }

// fakeKeyWatcher is a jetstream.KeyWatcher delivering what the test queued.
type fakeKeyWatcher struct{ ch chan jetstream.KeyValueEntry }

func (f fakeKeyWatcher) Updates() <-chan jetstream.KeyValueEntry { return f.ch }
func (f fakeKeyWatcher) Stop() error                             { return nil }

func TestAnEntryAlreadyHandledIsNotDecodedAgain(t *testing.T) {
	s, app, reports, _ := newTestState(t, "checkout", "i-1", nil)
	w := &Watcher{st: s}
	at := time.Unix(100, 0)
	bad := fakeEntry{key: "checkout.stable", value: []byte("garbage"), rev: 7, at: at}
	tests := []struct {
		name    string
		e       fakeEntry
		reports int
	}{
		{"first delivery", bad, 1},
		{"same entry again (re-watch, resync)", bad, 1},
		{"same entry, other time zone", fakeEntry{key: bad.key, value: bad.value, rev: 7, at: at.In(time.FixedZone("x", 3600))}, 1},
		{"new revision", fakeEntry{key: bad.key, value: envelopeBytes(t, "checkout", 2), rev: 8, at: at.Add(time.Second)}, 2},
		{"recreated bucket: same revision, later time", fakeEntry{key: bad.key, value: envelopeBytes(t, "checkout", 3), rev: 8, at: at.Add(time.Hour)}, 3},
	}
	for _, tt := range tests {
		w.handleEntry(true, tt.e)
		if len(*reports) != tt.reports {
			t.Fatalf("%s: %d reports, want %d", tt.name, len(*reports), tt.reports)
		}
	}
	if got := app.versions(); len(got) != 2 || got[1] != 3 {
		t.Fatalf("applied %v, want [2 3]", got)
	}
}

// TestResyncAheadOfTheWatchDoesNotApplyASupersededCanary: a resync may read
// a key before the watch delivers the values written before it (the Run
// goroutine was busy applying and fsyncing the cache while they queued). The
// late values are skipped: the instance never applies, nor ACKs, a canary
// that was replaced before it arrived.
func TestResyncAheadOfTheWatchDoesNotApplyASupersededCanary(t *testing.T) {
	zoneA := Selector{Labels: map[string]string{"zone": "a"}}
	zoneB := Selector{Labels: map[string]string{"zone": "b"}}
	s, app, reports, _ := newTestState(t, "checkout", "i-1", map[string]string{"zone": "a"})
	w := &Watcher{st: s}
	at := time.Unix(100, 0)
	w.handleEntry(true, fakeEntry{key: "checkout.stable", value: envelopeBytes(t, "checkout", 1), rev: 1, at: at})
	// Canary v3 for zone a (rev 7) is replaced at once by v4 for zone b (rev 8).
	a := fakeEntry{key: "checkout.canary", value: canaryBytes(t, 3, zoneA), rev: 7, at: at.Add(time.Second)}
	b := fakeEntry{key: "checkout.canary", value: canaryBytes(t, 4, zoneB), rev: 8, at: at.Add(2 * time.Second)}
	w.handleEntry(false, b) // the resync
	w.handleEntry(false, a) // the watch, late
	w.handleEntry(false, b) // the watch
	if got := app.versions(); !slices.Equal(got, []int64{1}) {
		t.Fatalf("applied %v, want only the stable v1", got)
	}
	if len(*reports) != 1 || (*reports)[0].Version != 1 {
		t.Fatalf("reports %+v, want the ACK of v1 alone", *reports)
	}
	// A recreated bucket restarts revisions, later: its values count.
	w.handleEntry(false, fakeEntry{key: "checkout.canary", value: canaryBytes(t, 5, zoneA), rev: 2, at: at.Add(time.Hour)})
	if s.running.Load() != 5 {
		t.Fatalf("running v%d, want the canary v5 of the recreated bucket", s.running.Load())
	}
}

// promotingKV is a jetstream.KeyValue whose Get serves entries, running
// onCanary once before the first read of the canary key.
type promotingKV struct {
	jetstream.KeyValue
	entries  map[string]fakeEntry
	onCanary func()
}

func (k *promotingKV) Get(_ context.Context, key string) (jetstream.KeyValueEntry, error) {
	if key == "checkout.canary" && k.onCanary != nil {
		k.onCanary()
		k.onCanary = nil
	}
	e, ok := k.entries[key]
	if !ok {
		return nil, jetstream.ErrKeyNotFound
	}
	return e, nil
}

// TestResyncDuringAPromotionStaysOnThePromotedVersion: the control plane
// promotes a canary (stable key written, then the canary key deleted)
// between the resync's reads of the two keys. The instance running the
// canary stays on it: it never applies, nor ACKs, the stable version the
// promotion replaced. An abort at the same point (the canary key deleted
// alone) still returns it to the stable version.
func TestResyncDuringAPromotionStaysOnThePromotedVersion(t *testing.T) {
	tests := []struct {
		name    string
		promote bool
		applied []int64
		acks    []int64
	}{
		{"promotion", true, []int64{1, 2}, []int64{1, 2}},
		{"abort", false, []int64{1, 2, 1}, []int64{1, 2, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, app, reports, _ := newTestState(t, "checkout", "i-1", nil)
			names, _ := NewNames("")
			w := &Watcher{st: s, names: names, opts: Options{Service: "checkout", RequestTimeout: time.Second}}
			at := time.Unix(100, 0)
			v1 := fakeEntry{key: "checkout.stable", value: envelopeBytes(t, "checkout", 1), rev: 1, at: at}
			c2 := fakeEntry{key: "checkout.canary", value: canaryBytes(t, 2, Selector{Percent: 100}), rev: 2, at: at.Add(time.Second)}
			w.handleEntry(true, v1)
			w.handleEntry(false, c2)
			kv := &promotingKV{entries: map[string]fakeEntry{v1.key: v1, c2.key: c2}}
			kv.onCanary = func() {
				if tt.promote {
					v2, err := DecodeCanary(c2.value)
					if err != nil {
						t.Fatal(err)
					}
					kv.entries[v1.key] = fakeEntry{key: v1.key, value: mustJSON(t, v2.Envelope), rev: 3, at: at.Add(2 * time.Second)}
				}
				delete(kv.entries, c2.key)
			}
			if err := w.resync(context.Background(), kv); err != nil {
				t.Fatal(err)
			}
			if got := app.versions(); !slices.Equal(got, tt.applied) {
				t.Fatalf("applied %v, want %v", got, tt.applied)
			}
			var acks []int64
			for _, r := range *reports {
				if r.Status == StatusACK {
					acks = append(acks, r.Version)
				}
			}
			if !slices.Equal(acks, tt.acks) {
				t.Fatalf("ACKs %v, want %v", acks, tt.acks)
			}
		})
	}
}
