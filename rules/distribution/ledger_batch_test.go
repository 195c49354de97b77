package distribution

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"governor.dev/governor/migrations"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/watch"
)

// batchStores lists the LedgerBatchStore implementations, with their
// database and a message the database refuses to record.
var batchStores = []struct {
	name string
	open func(t *testing.T) (*SQLStore, *sql.DB)
	// refuse makes the database refuse to record a NACK of
	// checkout/pod-bad and returns the message.
	refuse func(t *testing.T, db *sql.DB) watch.Report
}{
	{"sqlite", func(t *testing.T) (*SQLStore, *sql.DB) {
		db := openSQL(t, "sqlite", "file:"+filepath.Join(t.TempDir(), "ledger.db")+"?_pragma=busy_timeout(5000)", migrations.SQLite)
		return NewSQLStore(db), db
	}, func(t *testing.T, db *sql.DB) watch.Report {
		if _, err := db.Exec(`CREATE TRIGGER refuse_bad BEFORE INSERT ON delivery_instances
			WHEN NEW.instance = 'pod-bad' BEGIN SELECT RAISE(ABORT, 'refused'); END`); err != nil {
			t.Fatal(err)
		}
		return watch.Report{Service: "checkout", Instance: "pod-bad", Status: watch.StatusNACK, Version: 2, Error: "x"}
	}},
	{"postgres", func(t *testing.T) (*SQLStore, *sql.DB) {
		db := openSQL(t, "pgx", machinePostgres(t), migrations.Postgres)
		return NewSQLStore(db), db
	}, func(t *testing.T, db *sql.DB) watch.Report {
		if _, err := db.Exec(`CREATE FUNCTION refuse_bad() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN RAISE EXCEPTION 'refused'; END $$`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`CREATE TRIGGER refuse_bad BEFORE INSERT ON delivery_instances
			FOR EACH ROW WHEN (NEW.instance = 'pod-bad') EXECUTE FUNCTION refuse_bad()`); err != nil {
			t.Fatal(err)
		}
		return watch.Report{Service: "checkout", Instance: "pod-bad", Status: watch.StatusNACK, Version: 2, Error: "x"}
	}},
}

// writeCounter counts the instance writes of a ledger store, and runs
// before (once) ahead of the next one: another replica's write between
// the ledger's read of the instances and its own writes.
type writeCounter struct {
	LedgerStore
	before func()
	// single counts SaveInstance calls, batches SaveInstances calls and
	// batched the saves they held.
	single, batches, batched int
}

func (w *writeCounter) fire() {
	if f := w.before; f != nil {
		w.before = nil
		f()
	}
}

func (w *writeCounter) reset() { w.single, w.batches, w.batched = 0, 0, 0 }

func (w *writeCounter) SaveInstance(ctx context.Context, prev *Instance, in Instance, tr *Transition) error {
	w.fire()
	w.single++
	return w.LedgerStore.SaveInstance(ctx, prev, in, tr)
}

// batchWriteCounter is a writeCounter of a LedgerBatchStore.
type batchWriteCounter struct {
	*writeCounter
	bs LedgerBatchStore
}

func (b batchWriteCounter) InstancesOf(ctx context.Context, keys []InstanceKey) (map[InstanceKey]Instance, error) {
	return b.bs.InstancesOf(ctx, keys)
}

func (b batchWriteCounter) SaveInstances(ctx context.Context, saves []InstanceSave) ([]error, error) {
	b.fire()
	b.batches++
	b.batched += len(saves)
	return b.bs.SaveInstances(ctx, saves)
}

func wireMsg(t *testing.T, names watch.Names, v any) *nats.Msg {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	switch m := v.(type) {
	case *watch.Heartbeat:
		return &nats.Msg{Subject: names.HeartbeatSubject(m.Service), Data: data}
	case *watch.Report:
		return &nats.Msg{Subject: names.ReportSubject(m.Service), Data: data}
	}
	t.Fatalf("not a message: %T", v)
	return nil
}

// TestLedgerBatchRecordsWhatOneMessageAtATimeRecords: the messages Run
// finds waiting are recorded together, with one commit; what the ledger
// records (each instance's record, each transition) is what recording them
// one at a time records: an instance's messages apply in the order they
// came (an ACK moves it to SYNCED, a NACK to NACKED, a heartbeat sent
// before an ACK but handled after it does not move it back), and a
// transition is written for every change of state and no other.
func TestLedgerBatchRecordsWhatOneMessageAtATimeRecords(t *testing.T) {
	for _, st := range batchStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			t0 := time.Unix(1_700_000_000, 0)
			at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
			zone := map[string]string{"zone": "a"}
			msgs := []any{
				&watch.Heartbeat{Service: "checkout", Instance: "pod-0", Running: 1, IntervalMS: 1000, Labels: zone, At: at(1)},
				&watch.Heartbeat{Service: "checkout", Instance: "pod-1", Running: 1, IntervalMS: 1000, At: at(1)},
				&watch.Report{Service: "checkout", Instance: "pod-0", Status: watch.StatusACK, Version: 2, Running: 2, At: at(3)},
				&watch.Heartbeat{Service: "checkout", Instance: "pod-0", Running: 1, IntervalMS: 2000, Labels: zone, At: at(2)},
				&watch.Report{Service: "checkout", Instance: "pod-1", Status: watch.StatusNACK, Version: 2, Reason: watch.ReasonChecksum,
					Error: "checksum: mismatch", Running: 1, At: at(2)},
				&watch.Heartbeat{Service: "checkout", Instance: "pod-1", Running: 1, IntervalMS: 1000, At: at(3)},
				&watch.Heartbeat{Service: "cart", Instance: "pod-0", Running: 2, IntervalMS: 1000, At: at(1)},
				&watch.Heartbeat{Service: "checkout", Instance: "pod-2", Running: 2, IntervalMS: 1000, At: at(1)},
				&watch.Heartbeat{Service: "checkout", Instance: "pod-2", Running: 2, IntervalMS: 1000, At: at(2)},
			}
			record := func(batch bool) (LedgerStore, *writeCounter) {
				s, _ := st.open(t)
				counts := &writeCounter{LedgerStore: s}
				l := newTestLedger(t, batchWriteCounter{counts, s}, clock.NewFake(t0))
				for _, svc := range []string{"checkout", "cart"} {
					if err := l.Published(ctx, envelope(t, svc, 2), nil); err != nil {
						t.Fatal(err)
					}
				}
				var ms []*nats.Msg
				for _, m := range msgs {
					ms = append(ms, wireMsg(t, l.o.Names, m))
				}
				if batch {
					l.recordBatch(ctx, ms)
				} else {
					for _, m := range ms {
						l.record(ctx, m)
					}
				}
				return s, counts
			}
			one, _ := record(false)
			together, counts := record(true)
			if got := counts.batches; got != 1 {
				t.Fatalf("%d batch writes, want 1", got)
			}
			if got := counts.single; got != 0 {
				t.Fatalf("%d single writes beside the batch, want 0", got)
			}
			wantIns, err := one.Instances(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			gotIns, err := together.Instances(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(gotIns, wantIns) {
				t.Fatalf("instances recorded together\n%+v\nwant, as one at a time\n%+v", gotIns, wantIns)
			}
			if len(wantIns) != 4 || wantIns[1].Instance != "pod-0" || wantIns[1].State != StateSynced || wantIns[1].Running != 2 ||
				wantIns[1].HeartbeatMS != 2000 || wantIns[2].State != StateNacked {
				t.Fatalf("instances %+v: want pod-0 SYNCED on v2 (the late heartbeat of v1 not recorded) and pod-1 NACKED", wantIns)
			}
			for _, svc := range []string{"checkout", "cart"} {
				want, err := one.Transitions(ctx, svc, "", 0)
				if err != nil {
					t.Fatal(err)
				}
				got, err := together.Transitions(ctx, svc, "", 0)
				if err != nil {
					t.Fatal(err)
				}
				// The order of different instances' transitions may differ:
				// compare each instance's history.
				if !reflect.DeepEqual(byInstance(got), byInstance(want)) {
					t.Fatalf("%s transitions recorded together\n%+v\nwant, as one at a time\n%+v", svc, got, want)
				}
			}
			hist, err := together.Transitions(ctx, "checkout", "pod-0", 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(hist) != 2 || hist[0].From != StatePending || hist[0].To != StateSynced || hist[1].To != StatePending {
				t.Fatalf("pod-0 history %+v, want new -> PENDING -> SYNCED", hist)
			}
		})
	}
}

func byInstance(trs []Transition) map[string][]Transition {
	out := map[string][]Transition{}
	for _, tr := range trs {
		out[tr.Instance] = append(out[tr.Instance], tr)
	}
	return out
}

// TestLedgerBatchKeepsAnotherReplicasWriteOfAnInstance: another ledger
// replica records pod-0's ACK between this replica's read of the batch's
// instances and its write. The batch's save of pod-0 is refused
// (compare-and-set), the rest of the batch is written, and pod-0's message
// is recorded alone over the other replica's record: both stay.
func TestLedgerBatchKeepsAnotherReplicasWriteOfAnInstance(t *testing.T) {
	for _, st := range batchStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewFake(time.Unix(1_700_000_000, 0))
			s, _ := st.open(t)
			other := newTestLedger(t, s, clk)
			if err := other.Published(ctx, envelope(t, "checkout", 2), nil); err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"pod-0", "pod-1"} {
				if err := other.HandleHeartbeat(ctx, &watch.Heartbeat{Service: "checkout", Instance: id, Running: 1, IntervalMS: 1000}); err != nil {
					t.Fatal(err)
				}
			}
			store := &writeCounter{LedgerStore: s, before: func() {
				if err := other.HandleReport(ctx, &watch.Report{Service: "checkout", Instance: "pod-0", Status: watch.StatusACK,
					Version: 2, Running: 2}); err != nil {
					t.Error(err)
				}
			}}
			l := newTestLedger(t, batchWriteCounter{store, s}, clk)
			l.recordBatch(ctx, []*nats.Msg{
				wireMsg(t, l.o.Names, &watch.Report{Service: "checkout", Instance: "pod-0", Status: watch.StatusNACK, Version: 3,
					Error: "invalid", Running: 2}),
				wireMsg(t, l.o.Names, &watch.Heartbeat{Service: "checkout", Instance: "pod-1", Running: 2, IntervalMS: 1000}),
			})
			in, _, err := s.Instance(ctx, "checkout", "pod-0")
			if err != nil {
				t.Fatal(err)
			}
			if in.AckVersion != 2 || in.NackVersion != 3 || in.Running != 2 {
				t.Fatalf("pod-0 %+v, want the other replica's ACK of v2 and this one's NACK of v3", in)
			}
			if in, _, _ := s.Instance(ctx, "checkout", "pod-1"); in.Running != 2 || in.State != StateSynced {
				t.Fatalf("pod-1 %+v, want its heartbeat recorded with the batch", in)
			}
			if got := testutil.ToFloat64(l.conflicts); got != 1 {
				t.Fatalf("conflicts = %v, want 1 (the batch's save of pod-0 refused)", got)
			}
			if got := store.batches; got != 1 {
				t.Fatalf("%d batch writes, want 1", got)
			}
			if got := store.single; got != 1 {
				t.Fatalf("%d single writes, want 1 (pod-0's NACK, recorded alone)", got)
			}
		})
	}
}

// TestLedgerBatchRecordsTheOthersWhenTheDatabaseRefusesOneMessage: a
// message the database refuses (a trigger here) failed
// the transaction of the whole batch. The batch is written again without
// it; that message alone is counted failed.
func TestLedgerBatchRecordsTheOthersWhenTheDatabaseRefusesOneMessage(t *testing.T) {
	for _, st := range batchStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewFake(time.Unix(1_700_000_000, 0))
			s, db := st.open(t)
			bad := st.refuse(t, db)
			reg := prometheus.NewRegistry()
			store := &writeCounter{LedgerStore: s}
			l, err := NewLedger(LedgerOptions{Store: batchWriteCounter{store, s}, Clock: clk, Registerer: reg})
			if err != nil {
				t.Fatal(err)
			}
			var msgs []*nats.Msg
			for i := range 6 {
				msgs = append(msgs, wireMsg(t, l.o.Names, &watch.Heartbeat{Service: "checkout", Instance: fmt.Sprintf("pod-%d", i),
					Running: 1, IntervalMS: 1000}))
				if i == 2 {
					msgs = append(msgs, wireMsg(t, l.o.Names, &bad))
				}
			}
			l.recordBatch(ctx, msgs)
			ins, err := s.Instances(ctx, "checkout")
			if err != nil {
				t.Fatal(err)
			}
			if len(ins) != 6 {
				t.Fatalf("%d instances recorded, want the 6 good ones: %+v", len(ins), ins)
			}
			count := func(kind, result string) float64 {
				return counterValue2(t, reg, "governor_distribution_ledger_messages_total", map[string]string{"kind": kind, "result": result})
			}
			if count("heartbeat", "recorded") != 6 || count("nack", "failed") != 1 || count("heartbeat", "failed") != 0 {
				t.Fatalf("heartbeats recorded %v failed %v, nacks failed %v; want 6, 0, 1",
					count("heartbeat", "recorded"), count("heartbeat", "failed"), count("nack", "failed"))
			}
			if b, one := store.batches, store.single; b != 2 || one != 1 {
				t.Fatalf("%d batch writes and %d single ones, want 2 (the second without the refused message) and 1 (it alone)", b, one)
			}
		})
	}
}

// hangingBatchStore is a SQLStore whose writes wait for their context: a
// database that stops answering without refusing.
type hangingBatchStore struct {
	*SQLStore
	single *atomic.Int32
}

func (hangingBatchStore) SaveInstances(ctx context.Context, _ []InstanceSave) ([]error, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (h hangingBatchStore) SaveInstance(ctx context.Context, _ *Instance, _ Instance, _ *Transition) error {
	h.single.Add(1)
	<-ctx.Done()
	return ctx.Err()
}

// TestLedgerBatchGivesUpOnAStoreThatDoesNotAnswer: one RecordTimeout
// bounds a whole batch (not each of its messages, which held the loop for
// a timeout per message), and its messages are counted failed.
func TestLedgerBatchGivesUpOnAStoreThatDoesNotAnswer(t *testing.T) {
	s, _ := batchStores[0].open(t)
	reg := prometheus.NewRegistry()
	var single atomic.Int32
	l, err := NewLedger(LedgerOptions{Store: hangingBatchStore{s, &single}, Registerer: reg, RecordTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []*nats.Msg
	for i := range 100 {
		msgs = append(msgs, wireMsg(t, l.o.Names, &watch.Heartbeat{Service: "s", Instance: fmt.Sprintf("i-%d", i), Running: 1}))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.recordBatch(context.Background(), msgs)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute): // 100 timeouts would be 5s; a guard against hanging the suite, not a timing claim
		t.Fatal("recordBatch still waiting for a store that does not answer")
	}
	if got := counterValue2(t, reg, "governor_distribution_ledger_messages_total", map[string]string{"kind": "heartbeat", "result": "failed"}); got != 100 {
		t.Fatalf("failed heartbeats %v, want 100", got)
	}
	if got := single.Load(); got != 0 {
		t.Fatalf("%d messages written one at a time after the batch's timeout, want 0", got)
	}
}

// TestLedgerRunRecordsABurstOfMessages: Run records every message of a
// burst larger than a batch, on a database (the messages waiting are
// recorded together).
func TestLedgerRunRecordsABurstOfMessages(t *testing.T) {
	s, _ := batchStores[0].open(t)
	nc := connect(t, embedded(t).URL())
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	names := uniqueNames(t)
	reg := prometheus.NewRegistry()
	l, err := NewLedger(LedgerOptions{Store: s, Names: names, Clock: clk, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	runLedger(t, l, nc, clk)
	const n = 3 * maxBatch
	for i := range n {
		if err := nc.Publish(names.HeartbeatSubject("checkout"),
			fmt.Appendf(nil, `{"service":"checkout","instance":"pod-%d","running":1,"interval_ms":1000}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "every heartbeat recorded", func() bool {
		return counterValue2(t, reg, "governor_distribution_ledger_messages_total", map[string]string{"kind": "heartbeat", "result": "recorded"}) == n
	})
	ins, err := s.Instances(context.Background(), "checkout")
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) != n {
		t.Fatalf("%d instances recorded, want %d", len(ins), n)
	}
}

// TestLedgerRecordsANackErrorHoldingANul: PostgreSQL text cannot hold a NUL,
// which JSON and the SDK allow in a NACK's error (an applier quoting binary
// input). The SDK repeats that error in every heartbeat, so the instance was
// never recorded again; the NUL is now stored as U+FFFD, in labels too.
func TestLedgerRecordsANackErrorHoldingANul(t *testing.T) {
	for _, st := range ledgerStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewFake(time.Unix(1_700_000_000, 0))
			store := st.open(t)
			l := newTestLedger(t, store, clk)
			l.record(ctx, wireMsg(t, l.o.Names, &watch.Report{Service: "checkout", Instance: "pod-0", Status: watch.StatusNACK,
				Version: 2, Error: "bad\x00byte", Labels: map[string]string{"zone\x00": "a\x00"}}))
			clk.Advance(time.Second)
			l.record(ctx, wireMsg(t, l.o.Names, &watch.Heartbeat{Service: "checkout", Instance: "pod-0", IntervalMS: 1000,
				NackVersion: 2, NackError: "bad\x00byte", Labels: map[string]string{"zone\x00": "a\x00"}}))
			in, ok, err := store.Instance(ctx, "checkout", "pod-0")
			if err != nil || !ok {
				t.Fatalf("instance not recorded: %v, %v", ok, err)
			}
			if in.NackError != "bad\uFFFDbyte" || in.Labels["zone\uFFFD"] != "a\uFFFD" || !in.LastSeen.Equal(clk.Now()) {
				t.Fatalf("recorded %+v, want the NACK error and labels with U+FFFD and the heartbeat's time", in)
			}
		})
	}
}

// TestLedgerReevaluationInBatchesRecordsWhatOneAtATimeRecords: a
// publication (here a canary for zone a) and a sweep re-evaluate every
// instance of the service. On a LedgerBatchStore the instances whose
// state or target moves are written in batches, one transaction each, and
// the others not at all; what the ledger records (each record, each
// transition, its metrics) is what writing them one at a time records,
// for a fleet of every kind: instances on the old version, STALE ones,
// one already on the new version, one NACKED, one GONE, ones the canary
// does not select, and one another replica writes between the ledger's
// read and its write (refused by the compare-and-set, read again and
// evaluated anew).
func TestLedgerReevaluationInBatchesRecordsWhatOneAtATimeRecords(t *testing.T) {
	for _, st := range batchStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			t0 := time.Unix(1_700_000_000, 0)
			zoneA, zoneB := map[string]string{"zone": "a"}, map[string]string{"zone": "b"}
			type fleet struct {
				store   *writeCounter
				l       *Ledger
				reg     *prometheus.Registry
				publish writeCounts
				sweep   writeCounts
			}
			run := func(batch bool) fleet {
				s, _ := st.open(t)
				clk := clock.NewFake(t0)
				other := newTestLedger(t, s, clk) // another replica, and the fleet's past
				if err := other.Published(ctx, envelope(t, "checkout", 1), nil); err != nil {
					t.Fatal(err)
				}
				beat := func(id string, running int64, labels map[string]string) {
					t.Helper()
					if err := other.HandleHeartbeat(ctx, &watch.Heartbeat{Service: "checkout", Instance: id, Running: running,
						IntervalMS: 1000, Labels: labels}); err != nil {
						t.Fatal(err)
					}
				}
				fleetBeat := func(gone bool) {
					for _, id := range []string{"pod-a0", "pod-a1", "pod-a2", "pod-conflict"} {
						beat(id, 1, zoneA)
					}
					for _, id := range []string{"pod-b0", "pod-b1"} {
						beat(id, 1, zoneB)
					}
					beat("pod-b-stale", 0, zoneB)
					beat("pod-stale", 0, zoneA)
					beat("pod-new", 2, zoneA)
					if gone {
						beat("pod-gone", 1, zoneA)
					}
				}
				fleetBeat(true)
				if err := other.HandleReport(ctx, &watch.Report{Service: "checkout", Instance: "pod-nack", Status: watch.StatusNACK,
					Version: 2, Error: "apply: invalid", Running: 1, Labels: zoneA}); err != nil {
					t.Fatal(err)
				}
				clk.Advance(20 * time.Second)
				fleetBeat(false)
				beat("pod-nack", 1, zoneA)
				clk.Advance(20 * time.Second) // pod-gone silent for 40s
				fleetBeat(false)
				beat("pod-nack", 1, zoneA)
				if err := other.Sweep(ctx); err != nil {
					t.Fatal(err)
				}

				w := &writeCounter{LedgerStore: s}
				var store LedgerStore = w
				if batch {
					store = batchWriteCounter{w, s}
				}
				reg := prometheus.NewRegistry()
				l, err := NewLedger(LedgerOptions{Store: store, Clock: clk, Grace: 30 * time.Second, GoneAfter: 35 * time.Second,
					Registerer: reg})
				if err != nil {
					t.Fatal(err)
				}
				l.saveBatch = 3
				f := fleet{store: w, l: l, reg: reg}

				clk.Advance(time.Second)
				w.before = func() {
					if err := other.HandleReport(ctx, &watch.Report{Service: "checkout", Instance: "pod-conflict",
						Status: watch.StatusACK, Version: 2, Running: 2, Labels: zoneA}); err != nil {
						t.Error(err)
					}
				}
				if err := l.Published(ctx, envelope(t, "checkout", 2), &watch.Selector{Labels: zoneA}); err != nil {
					t.Fatal(err)
				}
				f.publish = writeCounts{w.single, w.batches, w.batched}
				w.reset()

				clk.Advance(31 * time.Second) // past the canary's grace, not yet GONE
				w.before = func() {
					if err := other.HandleReport(ctx, &watch.Report{Service: "checkout", Instance: "pod-a1",
						Status: watch.StatusACK, Version: 2, Running: 2, Labels: zoneA}); err != nil {
						t.Error(err)
					}
				}
				if err := l.Sweep(ctx); err != nil {
					t.Fatal(err)
				}
				f.sweep = writeCounts{w.single, w.batches, w.batched}
				return f
			}
			one, together := run(false), run(true)

			wantIns, err := one.store.Instances(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			gotIns, err := together.store.Instances(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(gotIns, wantIns) {
				t.Fatalf("instances re-evaluated in batches\n%+v\nwant, as one at a time\n%+v", gotIns, wantIns)
			}
			want, err := one.store.Transitions(ctx, "checkout", "", 0)
			if err != nil {
				t.Fatal(err)
			}
			got, err := together.store.Transitions(ctx, "checkout", "", 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) || !reflect.DeepEqual(byInstance(got), byInstance(want)) {
				t.Fatalf("transitions re-evaluated in batches\n%+v\nwant, as one at a time\n%+v", got, want)
			}
			for _, name := range []string{"governor_distribution_ledger_transitions_total", "governor_distribution_ledger_instances",
				"governor_distribution_ledger_conflicts_total"} {
				if g, w := gather(t, together.reg, name), gather(t, one.reg, name); g != w {
					t.Fatalf("%s re-evaluated in batches\n%s\nwant, as one at a time\n%s", name, g, w)
				}
			}
			if c := testutil.ToFloat64(together.l.conflicts); c != 2 {
				t.Fatalf("conflicts %v, want 2 (pod-conflict in the publication, pod-a1 in the sweep)", c)
			}

			// What the fleet went through, as recorded.
			states := map[string]State{}
			for _, in := range wantIns {
				states[in.Instance] = in.State
			}
			wantStates := map[string]State{"pod-a0": StateStale, "pod-a1": StateSynced, "pod-a2": StateStale, "pod-b-stale": StateStale,
				"pod-b0": StateSynced, "pod-b1": StateSynced, "pod-conflict": StateSynced, "pod-gone": StateGone, "pod-nack": StateNacked,
				"pod-new": StateSynced, "pod-stale": StateStale}
			if !reflect.DeepEqual(states, wantStates) {
				t.Fatalf("states %v, want %v", states, wantStates)
			}
			// The publication moves pod-a0, a1, a2, pod-stale, pod-new,
			// pod-nack and pod-gone's target (pod-conflict's save is
			// refused, and after the other replica's ACK it has nothing
			// to write); the sweep makes pod-a0, a1, a2 and pod-stale
			// STALE (pod-a1's save is refused likewise).
			if c := one.publish; c.batches != 0 || c.single != 8 {
				t.Fatalf("one at a time, the publication wrote %+v, want 8 single writes", c)
			}
			if c := together.publish; c.single != 0 || c.batches != 3 || c.batched != 8 {
				t.Fatalf("in batches of 3, the publication wrote %+v, want 8 saves in 3 batches and no single write", c)
			}
			if c := together.sweep; c.single != 0 || c.batches != 2 || c.batched != 4 {
				t.Fatalf("in batches of 3, the sweep wrote %+v, want 4 saves in 2 batches and no single write", c)
			}
		})
	}
}

// writeCounts are a writeCounter's counts.
type writeCounts struct{ single, batches, batched int }

// gather renders a registry's metric family for comparison.
func gather(t *testing.T, reg *prometheus.Registry, name string) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				fmt.Fprintf(&out, "%s=%s ", lp.GetName(), lp.GetValue())
			}
			fmt.Fprintf(&out, "%v %v\n", m.GetCounter().GetValue(), m.GetGauge().GetValue())
		}
	}
	return out.String()
}

// TestLedgerPublishedWritesInstancesInBatches: a publication to n
// instances of a service on a LedgerBatchStore writes them in
// ceil(n/batch) transactions, not n (a commit each held the ledger's lock,
// and its message loop, for seconds at 10,000 instances, and a slow disk
// ran past SweepTimeout with the re-evaluation half applied); a
// publication that moves no instance writes none.
func TestLedgerPublishedWritesInstancesInBatches(t *testing.T) {
	for _, st := range batchStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewFake(time.Unix(1_700_000_000, 0))
			s, _ := st.open(t)
			w := &writeCounter{LedgerStore: s}
			l := newTestLedger(t, batchWriteCounter{w, s}, clk)
			l.saveBatch = 4
			const n = 10
			for i := range n {
				if err := l.HandleHeartbeat(ctx, &watch.Heartbeat{Service: "checkout", Instance: fmt.Sprintf("pod-%d", i),
					Running: 1, IntervalMS: 1000}); err != nil {
					t.Fatal(err)
				}
			}
			w.reset()
			if err := l.Published(ctx, envelope(t, "checkout", 1), nil); err != nil {
				t.Fatal(err)
			}
			if w.single != 0 || w.batches != 3 || w.batched != n {
				t.Fatalf("publication to %d instances: %d single writes, %d saves in %d batches; want %d saves in 3 batches of at most 4",
					n, w.single, w.batched, w.batches, n)
			}
			ins, err := s.Instances(ctx, "checkout")
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range ins {
				if in.State != StateSynced || in.Target != 1 {
					t.Fatalf("%s %s on target v%d, want SYNCED on v1", in.Instance, in.State, in.Target)
				}
			}
			if trs, _ := s.Transitions(ctx, "checkout", "", 0); len(trs) != 2*n {
				t.Fatalf("%d transitions, want %d (new -> UNPUBLISHED -> SYNCED each)", len(trs), 2*n)
			}
			w.reset()
			if err := l.Published(ctx, envelope(t, "checkout", 1), nil); err != nil {
				t.Fatal(err)
			}
			clk.Advance(time.Second)
			if err := l.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
			if w.single != 0 || w.batches != 0 {
				t.Fatalf("a publication and a sweep that moved nothing wrote %d single and %d batches", w.single, w.batches)
			}
		})
	}
}

// TestLedgerReevaluationInBatchesFailsWhereOneAtATimeFails: a record the
// database refuses (a trigger here) fails the transaction of its whole
// batch; the batch is then written one instance at a time, so the
// publication writes what one at a time writes (the instances before the
// refused one) and fails with the same error.
func TestLedgerReevaluationInBatchesFailsWhereOneAtATimeFails(t *testing.T) {
	for _, st := range batchStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			run := func(batch bool) (LedgerStore, *writeCounter, error) {
				s, db := st.open(t)
				clk := clock.NewFake(time.Unix(1_700_000_000, 0))
				setup := newTestLedger(t, s, clk)
				if err := setup.Published(ctx, envelope(t, "checkout", 1), nil); err != nil {
					t.Fatal(err)
				}
				for i := range 6 {
					if err := setup.HandleHeartbeat(ctx, &watch.Heartbeat{Service: "checkout", Instance: fmt.Sprintf("pod-%d", i),
						Running: 1, IntervalMS: 1000}); err != nil {
						t.Fatal(err)
					}
				}
				refuse := []string{`CREATE TRIGGER refuse_pod3 BEFORE UPDATE ON delivery_instances
					WHEN NEW.instance = 'pod-3' BEGIN SELECT RAISE(ABORT, 'refused'); END`}
				if st.name == "postgres" {
					refuse = []string{`CREATE FUNCTION refuse_pod3() RETURNS trigger LANGUAGE plpgsql AS $$
						BEGIN RAISE EXCEPTION 'refused'; END $$`,
						`CREATE TRIGGER refuse_pod3 BEFORE UPDATE ON delivery_instances
						FOR EACH ROW WHEN (NEW.instance = 'pod-3') EXECUTE FUNCTION refuse_pod3()`}
				}
				for _, q := range refuse {
					if _, err := db.Exec(q); err != nil {
						t.Fatal(err)
					}
				}
				w := &writeCounter{LedgerStore: s}
				var store LedgerStore = w
				if batch {
					store = batchWriteCounter{w, s}
				}
				l := newTestLedger(t, store, clk)
				l.saveBatch = 4
				clk.Advance(time.Second)
				return s, w, l.Published(ctx, envelope(t, "checkout", 2), nil)
			}
			one, _, wantErr := run(false)
			together, w, err := run(true)
			if err == nil || wantErr == nil || err.Error() != wantErr.Error() {
				t.Fatalf("publication in batches failed with %v, want %v, as one at a time", err, wantErr)
			}
			wantIns, _ := one.Instances(ctx, "checkout")
			gotIns, _ := together.Instances(ctx, "checkout")
			if !reflect.DeepEqual(gotIns, wantIns) {
				t.Fatalf("instances re-evaluated in batches\n%+v\nwant, as one at a time\n%+v", gotIns, wantIns)
			}
			for i, in := range gotIns {
				want := StatePending // on v2
				if i >= 3 {
					want = StateSynced // on v1: pod-3 refused, and not reached
				}
				if in.State != want {
					t.Fatalf("%s %s on target v%d, want %s", in.Instance, in.State, in.Target, want)
				}
			}
			want, _ := one.Transitions(ctx, "checkout", "", 0)
			got, _ := together.Transitions(ctx, "checkout", "", 0)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("transitions re-evaluated in batches\n%+v\nwant, as one at a time\n%+v", got, want)
			}
			if w.batches != 1 || w.single != 4 {
				t.Fatalf("%d batches and %d single writes, want 1 (refused) and 4 (pod-0 to pod-3, alone)", w.batches, w.single)
			}
		})
	}
}

// reversedStore lists instances in reverse byte order, as a database
// whose collation sorts otherwise might ("pod_b" before "pod-a" before
// "Pod-c"), and keeps the order of each batch's saves.
type reversedStore struct {
	LedgerBatchStore
	batches [][]InstanceKey
}

func (r *reversedStore) Instances(ctx context.Context, service string) ([]Instance, error) {
	ins, err := r.LedgerBatchStore.Instances(ctx, service)
	slices.Reverse(ins)
	return ins, err
}

func (r *reversedStore) SaveInstances(ctx context.Context, saves []InstanceSave) ([]error, error) {
	var keys []InstanceKey
	for _, s := range saves {
		keys = append(keys, InstanceKey{s.In.Service, s.In.Instance})
	}
	r.batches = append(r.batches, keys)
	return r.LedgerBatchStore.SaveInstances(ctx, saves)
}

// TestLedgerReevaluationSavesInByteOrder: a re-evaluation's batch saves
// its instances ordered by service and instance in byte order, as a batch
// of messages does, whatever order the store lists them in: two replicas'
// transactions then lock rows in one order and cannot deadlock.
func TestLedgerReevaluationSavesInByteOrder(t *testing.T) {
	for _, st := range batchStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			t0 := time.Unix(1_700_000_000, 0)
			s, _ := st.open(t)
			rs := &reversedStore{LedgerBatchStore: s}
			l := newTestLedger(t, rs, clock.NewFake(t0))
			if err := l.Published(ctx, envelope(t, "checkout", 1), nil); err != nil {
				t.Fatal(err)
			}
			for _, in := range []string{"pod-a", "pod_b", "Pod-c", "ip-10-0-1-5", "ip-10-0-12-3"} {
				l.record(ctx, wireMsg(t, l.o.Names, &watch.Heartbeat{Service: "checkout", Instance: in, Running: 1, IntervalMS: 1000, At: t0}))
			}
			rs.batches = nil
			if err := l.Published(ctx, envelope(t, "checkout", 2), nil); err != nil {
				t.Fatal(err)
			}
			if len(rs.batches) == 0 {
				t.Fatal("the publication wrote no batch")
			}
			for _, b := range rs.batches {
				if !slices.IsSortedFunc(b, func(a, b InstanceKey) int {
					return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.Instance, b.Instance))
				}) {
					t.Fatalf("batch saves in %v, want byte order", b)
				}
			}
		})
	}
}
