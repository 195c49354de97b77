package distribution

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
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

// countingBatchStore counts the writes of a SQLStore: single and batched.
type countingBatchStore struct {
	*SQLStore
	single, batches atomic.Int32
	// before, if set, runs once before the first batch is written.
	before func()
}

func (c *countingBatchStore) SaveInstance(ctx context.Context, prev *Instance, in Instance, tr *Transition) error {
	c.single.Add(1)
	return c.SQLStore.SaveInstance(ctx, prev, in, tr)
}

func (c *countingBatchStore) SaveInstances(ctx context.Context, saves []InstanceSave) ([]error, error) {
	if c.batches.Add(1) == 1 && c.before != nil {
		c.before()
	}
	return c.SQLStore.SaveInstances(ctx, saves)
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
			record := func(batch bool) (LedgerStore, *countingBatchStore) {
				s, _ := st.open(t)
				store := &countingBatchStore{SQLStore: s}
				l := newTestLedger(t, store, clock.NewFake(t0))
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
				return store, store
			}
			one, _ := record(false)
			together, counts := record(true)
			if got := counts.batches.Load(); got != 1 {
				t.Fatalf("%d batch writes, want 1", got)
			}
			if got := counts.single.Load(); got != 0 {
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
			store := &countingBatchStore{SQLStore: s, before: func() {
				if err := other.HandleReport(ctx, &watch.Report{Service: "checkout", Instance: "pod-0", Status: watch.StatusACK,
					Version: 2, Running: 2}); err != nil {
					t.Error(err)
				}
			}}
			l := newTestLedger(t, store, clk)
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
			if got := store.batches.Load(); got != 1 {
				t.Fatalf("%d batch writes, want 1", got)
			}
			if got := store.single.Load(); got != 1 {
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
			store := &countingBatchStore{SQLStore: s}
			l, err := NewLedger(LedgerOptions{Store: store, Clock: clk, Registerer: reg})
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
			if b, one := store.batches.Load(), store.single.Load(); b != 2 || one != 1 {
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
