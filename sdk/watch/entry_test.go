package watch

import (
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
