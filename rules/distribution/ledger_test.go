package distribution

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	_ "modernc.org/sqlite" // database/sql driver "sqlite"

	"governor.dev/governor/migrations"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/sdk/watch"
)

// ledgerStores lists the LedgerStore implementations every ledger test runs
// against.
var ledgerStores = []struct {
	name string
	open func(t *testing.T) LedgerStore
}{
	{"memory", func(*testing.T) LedgerStore { return NewMemoryStore() }},
	{"sqlite", func(t *testing.T) LedgerStore {
		return NewSQLStore(openSQL(t, "sqlite", "file:"+filepath.Join(t.TempDir(), "ledger.db")+"?_pragma=busy_timeout(5000)", migrations.SQLite))
	}},
	{"postgres", func(t *testing.T) LedgerStore {
		return NewSQLStore(openSQL(t, "pgx", machinePostgres(t), migrations.Postgres))
	}},
}

func openSQL(t testing.TB, driver, dsn string, d migrations.Dialect) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := migrations.Up(context.Background(), db, d); err != nil {
		t.Fatal(err)
	}
	return db
}

func newTestLedger(t *testing.T, store LedgerStore, clk clock.Clock) *Ledger {
	t.Helper()
	l, err := NewLedger(LedgerOptions{Store: store, Clock: clk, Grace: 30 * time.Second, GoneAfter: 35 * time.Second, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLedgerStates(t *testing.T) {
	for _, st := range ledgerStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewFake(time.Unix(1_700_000_000, 0))
			l := newTestLedger(t, st.open(t), clk)
			zoneA, zoneB := map[string]string{"zone": "a"}, map[string]string{"zone": "b"}
			hb := func(id string, running int64, labels map[string]string) {
				t.Helper()
				if err := l.HandleHeartbeat(ctx, &watch.Heartbeat{Service: "checkout", Instance: id, Running: running, Labels: labels, IntervalMS: 1000}); err != nil {
					t.Fatal(err)
				}
			}
			report := func(id string, st watch.Status, v, running int64, reason watch.Reason, msg string) {
				t.Helper()
				if err := l.HandleReport(ctx, &watch.Report{Service: "checkout", Instance: id, Status: st, Version: v, Running: running, Reason: reason, Error: msg}); err != nil {
					t.Fatal(err)
				}
			}
			publish := func(v int64, sel *watch.Selector) {
				t.Helper()
				if err := l.Published(ctx, envelope(t, "checkout", v), sel); err != nil {
					t.Fatal(err)
				}
			}
			sweep := func() {
				t.Helper()
				if err := l.Sweep(ctx); err != nil {
					t.Fatal(err)
				}
			}
			expect := func(step, id string, want State, target int64) {
				t.Helper()
				in, ok, err := l.o.Store.Instance(ctx, "checkout", id)
				if err != nil || !ok {
					t.Fatalf("%s: instance %s: %v %v", step, id, ok, err)
				}
				if in.State != want || in.Target != target {
					t.Fatalf("%s: %s is %s for v%d, want %s for v%d", step, id, in.State, in.Target, want, target)
				}
			}

			publish(1, nil)
			hb("pod-a", 0, zoneA)
			hb("pod-b", 0, zoneB)
			expect("new instance behind", "pod-a", StatePending, 1)
			clk.Advance(31 * time.Second)
			hb("pod-b", 0, zoneB)
			sweep()
			expect("behind past the grace period", "pod-a", StateStale, 1)
			report("pod-a", watch.StatusACK, 1, 1, "", "")
			report("pod-b", watch.StatusACK, 1, 1, "", "")
			expect("acked", "pod-a", StateSynced, 1)

			publish(2, nil)
			expect("new version", "pod-a", StatePending, 2)
			report("pod-a", watch.StatusNACK, 2, 1, watch.ReasonApply, "routes[0]: limit conflict")
			expect("nacked", "pod-a", StateNacked, 2)
			in, _, _ := l.o.Store.Instance(ctx, "checkout", "pod-a")
			if in.NackError != "routes[0]: limit conflict" || in.NackReason != "apply" || in.Running != 1 {
				t.Fatalf("NACK not recorded: %+v", in)
			}

			clk.Advance(40 * time.Second)
			sweep()
			expect("silent", "pod-a", StateGone, 2)
			hb("pod-a", 1, zoneA)
			expect("back, still refusing v2", "pod-a", StateNacked, 2)

			publish(3, nil)
			report("pod-a", watch.StatusACK, 3, 3, "", "")
			report("pod-b", watch.StatusACK, 3, 3, "", "")
			expect("v3", "pod-a", StateSynced, 3)

			// A payload the SDK could not read at all (version 0) after v4.
			publish(4, nil)
			report("pod-b", watch.StatusNACK, 0, 3, watch.ReasonNotJSON, "payload is not JSON")
			expect("unreadable payload", "pod-b", StateNacked, 4)
			report("pod-b", watch.StatusACK, 4, 4, "", "")
			report("pod-a", watch.StatusACK, 4, 4, "", "")

			// Canary of v5 in zone a only, then abort.
			publish(5, &watch.Selector{Labels: zoneA})
			expect("canary selected", "pod-a", StatePending, 5)
			expect("canary not selected", "pod-b", StateSynced, 4)
			report("pod-a", watch.StatusACK, 5, 5, "", "")
			expect("canary applied", "pod-a", StateSynced, 5)
			if err := l.Aborted(ctx, "checkout"); err != nil {
				t.Fatal(err)
			}
			expect("aborted, still on the canary", "pod-a", StatePending, 4)
			report("pod-a", watch.StatusACK, 4, 4, "", "")
			expect("reverted", "pod-a", StateSynced, 4)

			hist, err := l.History(ctx, "checkout", "pod-a", 0)
			if err != nil {
				t.Fatal(err)
			}
			var got []State
			for i := len(hist) - 1; i >= 0; i-- {
				got = append(got, hist[i].To)
			}
			want := []State{StatePending, StateStale, StateSynced, StatePending, StateNacked, StateGone, StateNacked,
				StatePending, StateSynced, // v3
				StatePending, StateSynced, // v4
				StatePending, StateSynced, // canary v5
				StatePending, StateSynced} // abort: back to v4
			if len(got) != len(want) {
				t.Fatalf("history %v\nwant    %v", got, want)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("history %v\nwant    %v", got, want)
				}
			}
			if hist[len(hist)-1].From != "" || hist[0].From != StatePending {
				t.Fatalf("transition sources: first %q, last %q", hist[len(hist)-1].From, hist[0].From)
			}
			if limited, _ := l.History(ctx, "checkout", "", 3); len(limited) != 3 {
				t.Fatalf("History limit: %d rows", len(limited))
			}
			sum, err := l.Summary(ctx, "checkout")
			if err != nil || sum[StateSynced] != 2 {
				t.Fatalf("summary %v %v", sum, err)
			}
			ins, err := l.Instances(ctx, "checkout")
			if err != nil || len(ins) != 2 || ins[0].Instance != "pod-a" || ins[0].Labels["zone"] != "a" {
				t.Fatalf("instances %+v %v", ins, err)
			}
		})
	}
}

func TestLedgerSeedsItsTargetFromTheBucket(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	l, err := NewLedger(LedgerOptions{Store: NewMemoryStore(), Clock: clk, Registerer: prometheus.NewRegistry(),
		Latest: func(_ context.Context, service string) (int64, error) {
			if service == "checkout" {
				return 7, nil
			}
			return 0, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	for _, svc := range []string{"checkout", "payments"} {
		if err := l.HandleHeartbeat(ctx, &watch.Heartbeat{Service: svc, Instance: "pod-0", Running: 3}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		service string
		state   State
		target  int64
	}{
		{"checkout", StatePending, 7},
		{"payments", StateUnpublished, 0}, // nothing published: not SYNCED
	}
	for _, tt := range tests {
		in, _, _ := l.o.Store.Instance(ctx, tt.service, "pod-0")
		if in.State != tt.state || in.Target != tt.target {
			t.Errorf("%s: %s for v%d, want %s for v%d", tt.service, in.State, in.Target, tt.state, tt.target)
		}
	}
}

// TestLedgerInstancesOfAServiceWithNoVersionPublishedAreUnpublished: an
// instance of a service no version was ever published for (or of a
// misconfigured service name) is UNPUBLISHED, never SYNCED: it runs the SDK
// defaults, not approved rules. One that says it runs a version while none
// is published is UNPUBLISHED too, with a transition detail naming the
// version, so it is seen rather than counted as synced. A canary staged
// before any stable version leaves the instances it does not select
// UNPUBLISHED. The first publication moves them on as usual.
func TestLedgerInstancesOfAServiceWithNoVersionPublishedAreUnpublished(t *testing.T) {
	for _, st := range ledgerStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewFake(time.Unix(1_700_000_000, 0))
			l := newTestLedger(t, st.open(t), clk)
			zoneA, zoneB := map[string]string{"zone": "a"}, map[string]string{"zone": "b"}
			hb := func(id string, running int64, labels map[string]string) {
				t.Helper()
				if err := l.HandleHeartbeat(ctx, &watch.Heartbeat{Service: "checkout", Instance: id, Running: running, Labels: labels, IntervalMS: 1000}); err != nil {
					t.Fatal(err)
				}
			}
			expect := func(step, id string, want State, target int64, detail string) {
				t.Helper()
				in, ok, err := l.o.Store.Instance(ctx, "checkout", id)
				if err != nil || !ok {
					t.Fatalf("%s: instance %s: %v %v", step, id, ok, err)
				}
				if in.State != want || in.Target != target {
					t.Fatalf("%s: %s is %s for v%d, want %s for v%d", step, id, in.State, in.Target, want, target)
				}
				if detail == "" {
					return
				}
				h, err := l.History(ctx, "checkout", id, 1)
				if err != nil || len(h) != 1 || !strings.Contains(h[0].Detail, detail) {
					t.Fatalf("%s: %s history %+v %v, want a detail with %q", step, id, h, err, detail)
				}
			}

			hb("pod-a", 0, zoneA)
			hb("pod-b", 3, zoneB)
			expect("nothing published, SDK defaults", "pod-a", StateUnpublished, 0, "no version published")
			expect("nothing published, runs a version", "pod-b", StateUnpublished, 0, "runs v3")
			if err := l.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
			if g := testutil.ToFloat64(l.states.WithLabelValues("checkout", string(StateUnpublished))); g != 2 {
				t.Fatalf("gauge of UNPUBLISHED instances %v, want 2", g)
			}
			if g := testutil.ToFloat64(l.states.WithLabelValues("checkout", string(StateSynced))); g != 0 {
				t.Fatalf("gauge of SYNCED instances %v, want 0", g)
			}

			if err := l.Published(ctx, envelope(t, "checkout", 5), &watch.Selector{Labels: zoneA}); err != nil {
				t.Fatal(err)
			}
			expect("canary selected", "pod-a", StatePending, 5, "")
			expect("canary not selected, no stable version", "pod-b", StateUnpublished, 0, "")

			if err := l.Published(ctx, envelope(t, "checkout", 6), nil); err != nil {
				t.Fatal(err)
			}
			expect("first stable version", "pod-b", StatePending, 6, "")
			if err := l.HandleReport(ctx, &watch.Report{Service: "checkout", Instance: "pod-b", Status: watch.StatusACK, Version: 6, Running: 6}); err != nil {
				t.Fatal(err)
			}
			expect("applied", "pod-b", StateSynced, 6, "")
		})
	}
}

func TestLedgerLearnsAMissedNACKFromHeartbeats(t *testing.T) {
	ctx := context.Background()
	l := newTestLedger(t, NewMemoryStore(), clock.NewFake(time.Unix(1_700_000_000, 0)))
	if err := l.Published(ctx, envelope(t, "checkout", 4), nil); err != nil {
		t.Fatal(err)
	}
	// The NACK report itself was lost; the heartbeat repeats it.
	if err := l.HandleHeartbeat(ctx, &watch.Heartbeat{Service: "checkout", Instance: "pod-0", Running: 3,
		NackVersion: 4, NackReason: watch.ReasonChecksum, NackError: "checksum: mismatch"}); err != nil {
		t.Fatal(err)
	}
	in, _, _ := l.o.Store.Instance(ctx, "checkout", "pod-0")
	if in.State != StateNacked || in.NackError != "checksum: mismatch" || in.NackReason != "checksum" {
		t.Fatalf("instance %+v, want NACKED with the error", in)
	}
}

func TestLedgerRecordsMalformedMessages(t *testing.T) {
	reg := prometheus.NewRegistry()
	l, err := NewLedger(LedgerOptions{Store: NewMemoryStore(), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	n := l.o.Names
	tests := []struct {
		subject string
		data    string
		kind    string
		result  string
	}{
		{n.ReportSubject("s"), `{"service":"s","instance":"i","version":1,"status":"ack","running":1}`, "ack", "recorded"},
		{n.ReportSubject("s"), `{"service":"s","instance":"i","version":2,"status":"nack","error":"x","running":1}`, "nack", "recorded"},
		{n.HeartbeatSubject("s"), `{"service":"s","instance":"i","running":1}`, "heartbeat", "recorded"},
		{n.ReportSubject("s"), `not json`, "ack", "malformed"},
		{n.HeartbeatSubject("s"), `{"service":"s"}`, "heartbeat", "malformed"},
		{n.ReportSubject("other"), `{"service":"s","instance":"i","version":3,"status":"ack","running":3}`, "ack", "malformed"},
		{n.HeartbeatSubject("other"), `{"service":"s","instance":"i","running":3}`, "heartbeat", "malformed"},
	}
	for _, tt := range tests {
		before := counterValue2(t, reg, "governor_distribution_ledger_messages_total", map[string]string{"kind": tt.kind, "result": tt.result})
		l.record(context.Background(), natsMsg(tt.subject, tt.data))
		if got := counterValue2(t, reg, "governor_distribution_ledger_messages_total", map[string]string{"kind": tt.kind, "result": tt.result}); got != before+1 {
			t.Fatalf("%s %s: messages{kind=%s,result=%s} = %v", tt.subject, tt.data, tt.kind, tt.result, got)
		}
	}
	in, _, _ := l.o.Store.Instance(context.Background(), "s", "i")
	if in.Running != 1 {
		t.Fatalf("a message on another service's subject changed the instance: running %d", in.Running)
	}
}

func TestNewLedgerRefusesBadOptions(t *testing.T) {
	tests := []struct {
		name  string
		o     LedgerOptions
		field string // the error names it
	}{
		{"no store", LedgerOptions{}, "Store"},
		{"negative grace", LedgerOptions{Store: NewMemoryStore(), Grace: -time.Second}, "Grace"},
		{"negative gone beats", LedgerOptions{Store: NewMemoryStore(), GoneBeats: -1}, "GoneBeats"},
		{"negative forget after", LedgerOptions{Store: NewMemoryStore(), ForgetAfter: -time.Hour}, "ForgetAfter"},
		{"negative transition retention", LedgerOptions{Store: NewMemoryStore(), TransitionRetention: -time.Hour}, "TransitionRetention"},
		{"negative buffer", LedgerOptions{Store: NewMemoryStore(), Buffer: -1}, "Buffer"},
		{"negative record timeout", LedgerOptions{Store: NewMemoryStore(), RecordTimeout: -time.Second}, "RecordTimeout"},
		{"negative sweep timeout", LedgerOptions{Store: NewMemoryStore(), SweepTimeout: -time.Second}, "SweepTimeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewLedger(tt.o)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("err %v, want an ErrInvalid naming %s", err, tt.field)
			}
		})
	}
}

// countingStore counts instance writes.
type countingStore struct {
	*MemoryStore
	saves int
}

func (c *countingStore) SaveInstance(ctx context.Context, prev *Instance, in Instance, tr *Transition) error {
	c.saves++
	return c.MemoryStore.SaveInstance(ctx, prev, in, tr)
}

func TestSweepWritesOnlyWhatChanged(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	store := &countingStore{MemoryStore: NewMemoryStore()}
	l := newTestLedger(t, store, clk)
	if err := l.Published(ctx, envelope(t, "checkout", 1), nil); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"pod-0", "pod-1"} {
		if err := l.HandleHeartbeat(ctx, &watch.Heartbeat{Service: "checkout", Instance: id, Running: 1, IntervalMS: 10000}); err != nil {
			t.Fatal(err)
		}
	}
	before := store.saves
	clk.Advance(5 * time.Second)
	if err := l.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if store.saves != before {
		t.Fatalf("a sweep with nothing changed wrote %d instances", store.saves-before)
	}
	clk.Advance(40 * time.Second) // past GoneAfter: both go
	if err := l.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if store.saves != before+2 {
		t.Fatalf("a sweep that made 2 instances GONE wrote %d", store.saves-before)
	}
}

// A sweep moves the ledger's stable version up to the bucket's when the
// ledger missed a publication, so instances that run it are SYNCED; when
// the bucket cannot be read, the sweep goes on with the recorded target.
func TestLedgerSweepCatchesUpWithAMissedPublication(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	var bucket int64 = 1
	var bucketErr error
	l, err := NewLedger(LedgerOptions{Store: NewMemoryStore(), Clock: clk, Registerer: prometheus.NewRegistry(),
		Latest: func(context.Context, string) (int64, error) { return bucket, bucketErr }})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Published(ctx, envelope(t, "checkout", 1), nil); err != nil {
		t.Fatal(err)
	}
	canary := watch10()
	if err := l.Published(ctx, envelope(t, "checkout", 2), &canary); err != nil {
		t.Fatal(err)
	}
	// v3 reaches the bucket; the ledger is not told (its store failed).
	bucket = 3
	bucketErr = errors.New("nats: timeout")
	clk.Advance(time.Minute)
	if err := l.HandleHeartbeat(ctx, &watch.Heartbeat{Service: "checkout", Instance: "pod-0", Running: 3, IntervalMS: 1000}); err != nil {
		t.Fatal(err)
	}
	if err := l.Sweep(ctx); err != nil {
		t.Fatalf("sweep with the bucket unreadable: %v", err)
	}
	if tg, _, _ := l.o.Store.Target(ctx, "checkout"); tg.Stable != 1 {
		t.Fatalf("target stable v%d with the bucket unreadable, want the recorded v1", tg.Stable)
	}
	bucketErr = nil
	if err := l.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	in, _, _ := l.o.Store.Instance(ctx, "checkout", "pod-0")
	if in.State != StateSynced || in.Target != 3 {
		t.Fatalf("pod-0 runs v3, the bucket's version, but the ledger says %s for v%d", in.State, in.Target)
	}
	if tg, _, _ := l.o.Store.Target(ctx, "checkout"); tg.Stable != 3 || tg.Canary != 0 {
		t.Fatalf("target %+v, want stable v3 and the overtaken canary v2 gone", tg)
	}
}

// pausingStore holds a ledger replica between its read of a record and its
// write: the first read of an instance (or target, as armed) returns, then
// waits until released while another replica writes the same record.
type pausingStore struct {
	LedgerStore
	mu       sync.Mutex
	armed    string // "instance" or "target"
	read     chan struct{}
	released chan struct{}
}

func newPausingStore(s LedgerStore, what string) *pausingStore {
	return &pausingStore{LedgerStore: s, armed: what, read: make(chan struct{}), released: make(chan struct{})}
}

func (p *pausingStore) pause(what string) {
	p.mu.Lock()
	hit := p.armed == what
	if hit {
		p.armed = ""
	}
	p.mu.Unlock()
	if hit {
		close(p.read)
		<-p.released
	}
}

func (p *pausingStore) Instance(ctx context.Context, service, instance string) (Instance, bool, error) {
	in, ok, err := p.LedgerStore.Instance(ctx, service, instance)
	p.pause("instance")
	return in, ok, err
}

func (p *pausingStore) Target(ctx context.Context, service string) (Target, bool, error) {
	t, ok, err := p.LedgerStore.Target(ctx, service)
	p.pause("target")
	return t, ok, err
}

// interleave runs first on replica b until it has read the record the
// store is armed for, then second on replica a to completion, then lets b
// write.
func interleave(t *testing.T, ps *pausingStore, first, second func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- first() }()
	<-ps.read
	if err := second(); err != nil {
		close(ps.released)
		<-done
		t.Fatal(err)
	}
	close(ps.released)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestLedgerReplicasKeepEachOthersConfirmations: ledger replicas share the
// report and heartbeat subjects in a queue group, so one instance's ACK and
// heartbeat can be recorded by two replicas at once. Replica b reads
// pod-0's record (acked v1) for a heartbeat; replica a records pod-0's ACK
// of v2; then b writes. b's write must not carry its stale copy over a's:
// the store refuses it (compare-and-set), b reads again and the ACK of v2
// stays in the ledger.
func TestLedgerReplicasKeepEachOthersConfirmations(t *testing.T) {
	for _, st := range ledgerStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewFake(time.Unix(1_700_000_000, 0))
			store := st.open(t)
			a := newTestLedger(t, store, clk)
			if err := a.Published(ctx, envelope(t, "checkout", 1), nil); err != nil {
				t.Fatal(err)
			}
			ack := func(v int64) error {
				return a.HandleReport(ctx, &watch.Report{Service: "checkout", Instance: "pod-0", Status: watch.StatusACK,
					Version: v, Running: v, Labels: map[string]string{"zone": "a"}})
			}
			if err := ack(1); err != nil {
				t.Fatal(err)
			}
			if err := a.Published(ctx, envelope(t, "checkout", 2), nil); err != nil {
				t.Fatal(err)
			}
			ps := newPausingStore(store, "instance")
			b := newTestLedger(t, ps, clk)
			interleave(t, ps, func() error {
				return b.HandleHeartbeat(ctx, &watch.Heartbeat{Service: "checkout", Instance: "pod-0", Running: 2,
					IntervalMS: 1000, Labels: map[string]string{"zone": "a"}})
			}, func() error { return ack(2) })
			in, _, err := store.Instance(ctx, "checkout", "pod-0")
			if err != nil {
				t.Fatal(err)
			}
			if in.AckVersion != 2 || in.Running != 2 || in.State != StateSynced || in.HeartbeatMS != 1000 {
				t.Fatalf("pod-0 %+v, want the ACK of v2 and the heartbeat both recorded, SYNCED", in)
			}
			if got := testutil.ToFloat64(b.conflicts); got != 1 {
				t.Fatalf("conflicts = %v, want 1 (b's first write refused)", got)
			}
		})
	}
}

// TestLedgerReplicasKeepEachOthersTargetChanges: the relay of one replica
// records a new stable version (v2) while an operator's canary (v3) is
// recorded by another replica that read the target before. The canary's
// write must not put back the stable version it read (v1): the store
// refuses it, the replica reads again and the target holds both.
func TestLedgerReplicasKeepEachOthersTargetChanges(t *testing.T) {
	for _, st := range ledgerStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewFake(time.Unix(1_700_000_000, 0))
			store := st.open(t)
			a := newTestLedger(t, store, clk)
			if err := a.Published(ctx, envelope(t, "checkout", 1), nil); err != nil {
				t.Fatal(err)
			}
			ps := newPausingStore(store, "target")
			b := newTestLedger(t, ps, clk)
			sel := watch.Selector{Percent: 10, Labels: map[string]string{"zone": "a"}}
			interleave(t, ps, func() error { return b.Published(ctx, envelope(t, "checkout", 3), &sel) },
				func() error { return a.Published(ctx, envelope(t, "checkout", 2), nil) })
			tg, _, err := store.Target(ctx, "checkout")
			if err != nil {
				t.Fatal(err)
			}
			if tg.Stable != 2 || tg.Canary != 3 || tg.Selector == nil || tg.Selector.Labels["zone"] != "a" {
				t.Fatalf("target %+v, want stable v2 and canary v3", tg)
			}
			if got := testutil.ToFloat64(b.conflicts); got != 1 {
				t.Fatalf("conflicts = %v, want 1 (b's first write refused)", got)
			}
		})
	}
}

// TestLedgerStoresWriteOnlyOverWhatWasRead: SetTarget, SaveInstance and
// DeleteInstance write only over the record as the writer read it (nil:
// none), a refused SaveInstance appends no transition, and DeleteInstance
// keeps the transitions.
func TestLedgerStoresWriteOnlyOverWhatWasRead(t *testing.T) {
	for _, st := range ledgerStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			s := st.open(t)
			at := time.Unix(1_700_000_000, 0)
			t1 := Target{Service: "checkout", Stable: 1, StableAt: at}
			if err := s.SetTarget(ctx, nil, t1); err != nil {
				t.Fatal(err)
			}
			if err := s.SetTarget(ctx, nil, t1); !errors.Is(err, ErrChanged) {
				t.Fatalf("a second first write: %v, want ErrChanged", err)
			}
			read, _, err := s.Target(ctx, "checkout")
			if err != nil {
				t.Fatal(err)
			}
			t2 := read
			t2.Canary, t2.CanaryAt, t2.Selector = 2, at.Add(time.Second), &watch.Selector{Percent: 5}
			if err := s.SetTarget(ctx, &read, t2); err != nil {
				t.Fatal(err)
			}
			if err := s.SetTarget(ctx, &read, Target{Service: "checkout", Stable: 9}); !errors.Is(err, ErrChanged) {
				t.Fatalf("write over a stale target: %v, want ErrChanged", err)
			}
			if got, _, _ := s.Target(ctx, "checkout"); got.Stable != 1 || got.Canary != 2 {
				t.Fatalf("target %+v after a refused write, want stable v1 canary v2", got)
			}

			in := Instance{Service: "checkout", Instance: "pod-0", Labels: map[string]string{"zone": "a"}, Running: 1,
				Target: 1, State: StateSynced, Since: at, LastSeen: at, HeartbeatMS: 1000, AckVersion: 1, MessageAt: at}
			if err := s.SaveInstance(ctx, nil, in, nil); err != nil {
				t.Fatal(err)
			}
			if err := s.SaveInstance(ctx, nil, in, nil); !errors.Is(err, ErrChanged) {
				t.Fatalf("a second first write: %v, want ErrChanged", err)
			}
			old, _, err := s.Instance(ctx, "checkout", "pod-0")
			if err != nil {
				t.Fatal(err)
			}
			nacked := old
			nacked.State, nacked.NackVersion, nacked.NackError, nacked.NackAt = StateNacked, 2, "bad", at.Add(time.Second)
			tr := &Transition{Service: "checkout", Instance: "pod-0", From: StateSynced, To: StateNacked, At: at}
			if err := s.SaveInstance(ctx, &old, nacked, tr); err != nil {
				t.Fatal(err)
			}
			if err := s.SaveInstance(ctx, &old, in, tr); !errors.Is(err, ErrChanged) {
				t.Fatalf("write over a stale instance: %v, want ErrChanged", err)
			}
			got, _, _ := s.Instance(ctx, "checkout", "pod-0")
			if got.State != StateNacked || got.NackError != "bad" {
				t.Fatalf("instance %+v after a refused write, want the NACK kept", got)
			}
			if trs, _ := s.Transitions(ctx, "checkout", "", 0); len(trs) != 1 {
				t.Fatalf("%d transitions, want 1: a refused write appends none", len(trs))
			}
			again, _, _ := s.Instance(ctx, "checkout", "pod-0")
			again.Running, again.MessageAt = 2, at.Add(2*time.Second)
			if err := s.SaveInstance(ctx, &got, again, nil); err != nil {
				t.Fatalf("write over the record as read: %v", err)
			}
			if read, _, _ := s.Instance(ctx, "checkout", "pod-0"); !read.MessageAt.Equal(again.MessageAt) {
				t.Fatalf("message time %v, want %v", read.MessageAt, again.MessageAt)
			}
			stale := again
			stale.MessageAt = at
			if err := s.SaveInstance(ctx, &stale, again, nil); !errors.Is(err, ErrChanged) {
				t.Fatalf("write over an instance with another message time: %v, want ErrChanged", err)
			}

			if err := s.DeleteInstance(ctx, got); !errors.Is(err, ErrChanged) {
				t.Fatalf("delete of a stale instance: %v, want ErrChanged", err)
			}
			if _, ok, _ := s.Instance(ctx, "checkout", "pod-0"); !ok {
				t.Fatal("a refused delete deleted the instance")
			}
			if err := s.DeleteInstance(ctx, again); err != nil {
				t.Fatalf("delete of the record as read: %v", err)
			}
			if _, ok, _ := s.Instance(ctx, "checkout", "pod-0"); ok {
				t.Fatal("instance still there after its delete")
			}
			if trs, _ := s.Transitions(ctx, "checkout", "pod-0", 0); len(trs) != 1 {
				t.Fatalf("%d transitions after the delete, want the 1 kept", len(trs))
			}
		})
	}
}

// A canary told twice (a relay that died after telling the ledger and
// before marking its row done; the next relay finds the canary staged and
// tells the ledger again) does not restart the grace period: an instance
// STALE on the canary stays STALE.
func TestLedgerCanaryToldTwiceKeepsItsGracePeriod(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	l := newTestLedger(t, NewMemoryStore(), clk)
	if err := l.Published(ctx, envelope(t, "checkout", 1), nil); err != nil {
		t.Fatal(err)
	}
	all := watch.Selector{Percent: 100}
	if err := l.Published(ctx, envelope(t, "checkout", 2), &all); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	if err := l.HandleHeartbeat(ctx, &watch.Heartbeat{Service: "checkout", Instance: "pod-a", Running: 1, IntervalMS: 1000}); err != nil {
		t.Fatal(err)
	}
	if in, _, _ := l.o.Store.Instance(ctx, "checkout", "pod-a"); in.State != StateStale {
		t.Fatalf("pod-a %s a minute after the canary, want STALE", in.State)
	}
	if err := l.Published(ctx, envelope(t, "checkout", 2), &all); err != nil {
		t.Fatal(err)
	}
	if in, _, _ := l.o.Store.Instance(ctx, "checkout", "pod-a"); in.State != StateStale {
		t.Fatalf("after the canary was told again, pod-a %s, want still STALE", in.State)
	}
}

// Canary versions only go forward: one told late, after a newer one was
// staged, or one the stable version overtook, leaves the recorded canary.
func TestLedgerKeepsTheNewerCanaryWhenAnOlderIsToldLate(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	l := newTestLedger(t, NewMemoryStore(), clk)
	if err := l.Published(ctx, envelope(t, "checkout", 2), nil); err != nil {
		t.Fatal(err)
	}
	all := watch.Selector{Percent: 100}
	for _, v := range []int64{4, 3, 2, 1} {
		if err := l.Published(ctx, envelope(t, "checkout", v), &all); err != nil {
			t.Fatal(err)
		}
	}
	if tg, _, _ := l.o.Store.Target(ctx, "checkout"); tg.Canary != 4 || tg.Stable != 2 {
		t.Fatalf("target stable v%d canary v%d, want stable v2 canary v4", tg.Stable, tg.Canary)
	}
}

// Instances gone for good (pods replaced by a deploy, processes restarted
// under a new id) are forgotten after ForgetAfter, so the instance list and
// the GONE gauge do not grow with every restart; one heard from again is
// recorded anew.
func TestLedgerForgetsInstancesGoneForLong(t *testing.T) {
	for _, st := range ledgerStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewFake(time.Unix(1_700_000_000, 0))
			l := newTestLedger(t, st.open(t), clk) // ForgetAfter: the default 24h
			hb := func(id string) {
				t.Helper()
				if err := l.HandleHeartbeat(ctx, &watch.Heartbeat{Service: "checkout", Instance: id, Running: 1, IntervalMS: 1000}); err != nil {
					t.Fatal(err)
				}
			}
			sweep := func() {
				t.Helper()
				if err := l.Sweep(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Published(ctx, envelope(t, "checkout", 1), nil); err != nil {
				t.Fatal(err)
			}
			for day := range 3 { // a new pod every day
				id := fmt.Sprintf("pod-%d", day)
				for range 24 {
					hb(id)
					clk.Advance(time.Hour)
					sweep()
				}
			}
			ins, err := l.Instances(ctx, "checkout")
			if err != nil {
				t.Fatal(err)
			}
			if len(ins) != 1 || ins[0].Instance != "pod-2" || ins[0].State != StateGone {
				t.Fatalf("instances %+v, want only pod-2, gone an hour ago (pod-0 and pod-1 over 24h ago)", ins)
			}
			if g := testutil.ToFloat64(l.states.WithLabelValues("checkout", string(StateGone))); g != 1 {
				t.Fatalf("GONE gauge %v, want 1", g)
			}
			clk.Advance(time.Minute)
			hb("pod-0")
			sweep()
			ins, _ = l.Instances(ctx, "checkout")
			if len(ins) != 2 || ins[0].Instance != "pod-0" || ins[0].State != StateSynced || ins[1].Instance != "pod-2" {
				t.Fatalf("instances %+v, want pod-0 back and SYNCED, pod-2 gone, pod-1 forgotten", ins)
			}
			if trs, _ := l.History(ctx, "checkout", "pod-1", 0); len(trs) == 0 {
				t.Fatal("the history of the forgotten pod-1 went with it")
			}
		})
	}
}

// A service whose every instance was forgotten loses its state gauges.
func TestLedgerDropsTheGaugesOfAServiceWithNoInstanceLeft(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	reg := prometheus.NewRegistry()
	l, err := NewLedger(LedgerOptions{Store: NewMemoryStore(), Clock: clk, ForgetAfter: time.Hour, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.HandleHeartbeat(ctx, &watch.Heartbeat{Service: "checkout", Instance: "pod-0", IntervalMS: 1000}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := l.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Hour)
	}
	if n := testutil.CollectAndCount(l.states); n != 0 {
		t.Fatalf("%d state gauges left for a service with no instance", n)
	}
}

// TestLedgerHeartbeatSentBeforeAnACKDoesNotMoveTheInstanceBack: reports and
// heartbeats arrive on two subscriptions (and are shared out between
// replicas), so a heartbeat sent before an ACK of v2 (still running v1) can
// be handled after it. It must not move the instance back to v1 (PENDING,
// with false transitions): the instance stays SYNCED on v2, and only its
// liveness is refreshed. A later heartbeat is recorded as usual, and one
// sent long before the newest message (the instance's clock stepped back)
// is taken as newer rather than ignored for good.
func TestLedgerHeartbeatSentBeforeAnACKDoesNotMoveTheInstanceBack(t *testing.T) {
	for _, st := range ledgerStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			t0 := time.Unix(1_700_000_000, 0)
			clk := clock.NewFake(t0)
			store := st.open(t)
			l := newTestLedger(t, store, clk)
			sent := func(d time.Duration) time.Time { return t0.Add(d + 123456*time.Nanosecond) } // the SDK's clock, sub-second
			ack := func(v int64, at time.Time) {
				t.Helper()
				if err := l.Published(ctx, envelope(t, "checkout", v), nil); err != nil {
					t.Fatal(err)
				}
				if err := l.HandleReport(ctx, &watch.Report{Service: "checkout", Instance: "pod-0", Status: watch.StatusACK,
					Version: v, Running: v, At: at}); err != nil {
					t.Fatal(err)
				}
			}
			hb := func(running int64, at time.Time) {
				t.Helper()
				if err := l.HandleHeartbeat(ctx, &watch.Heartbeat{Service: "checkout", Instance: "pod-0", Running: running,
					IntervalMS: 1000, At: at}); err != nil {
					t.Fatal(err)
				}
			}
			expect := func(step string, running int64, transitions int, messageAt time.Time) {
				t.Helper()
				in, _, err := store.Instance(ctx, "checkout", "pod-0")
				if err != nil {
					t.Fatal(err)
				}
				if d := in.MessageAt.Sub(messageAt).Abs(); d >= time.Microsecond { // PostgreSQL keeps microseconds
					t.Fatalf("%s: message time %v, want %v", step, in.MessageAt, messageAt)
				}
				if in.State != StateSynced || in.Running != running || !in.LastSeen.Equal(clk.Now()) {
					t.Fatalf("%s: pod-0 %s on v%d seen %v, want SYNCED on v%d seen %v", step, in.State, in.Running,
						in.LastSeen, running, clk.Now())
				}
				if hist, _ := l.History(ctx, "checkout", "pod-0", 0); len(hist) != transitions {
					t.Fatalf("%s: %d transitions, want %d", step, len(hist), transitions)
				}
			}

			ack(1, sent(0))
			expect("acked v1", 1, 1, sent(0))
			clk.Advance(2 * time.Second)
			ack(2, sent(2*time.Second))
			expect("acked v2", 2, 3, sent(2*time.Second)) // PENDING, then SYNCED
			clk.Advance(time.Second)
			hb(1, sent(time.Second))
			expect("heartbeat sent before the ACK, handled after", 2, 3, sent(2*time.Second))
			clk.Advance(time.Second)
			hb(2, sent(3*time.Second))
			expect("next heartbeat", 2, 3, sent(3*time.Second))
			clk.Advance(time.Second)
			hb(2, sent(3*time.Second-time.Hour))
			expect("clock stepped back by an hour", 2, 3, sent(3*time.Second-time.Hour))
			clk.Advance(time.Second)
			hb(2, sent(4*time.Second-time.Hour))
			expect("after the step", 2, 3, sent(4*time.Second-time.Hour))
		})
	}
}

// TestLedgerPrunesTransitionsOlderThanTheRetention: with a pod replaced
// every day, the history does not grow without bound: sweeps delete the
// transitions older than TransitionRetention (default 30 days), of
// forgotten pods and of live ones, but never the newest transition of an
// instance the ledger still records, however old.
func TestLedgerPrunesTransitionsOlderThanTheRetention(t *testing.T) {
	for _, st := range ledgerStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewFake(time.Unix(1_700_000_000, 0))
			store := st.open(t)
			l := newTestLedger(t, store, clk) // TransitionRetention: the default
			if got := l.o.TransitionRetention; got != 30*24*time.Hour {
				t.Fatalf("default retention %v, want 30 days", got)
			}
			hb := func(id string, running int64) {
				t.Helper()
				if err := l.HandleHeartbeat(ctx, &watch.Heartbeat{Service: "checkout", Instance: id, Running: running, IntervalMS: 1000}); err != nil {
					t.Fatal(err)
				}
			}
			sweep := func() {
				t.Helper()
				if err := l.Sweep(ctx); err != nil {
					t.Fatal(err)
				}
			}
			count := func(instance string) int {
				t.Helper()
				trs, err := store.Transitions(ctx, "checkout", instance, 0)
				if err != nil {
					t.Fatal(err)
				}
				return len(trs)
			}
			if err := l.Published(ctx, envelope(t, "checkout", 1), nil); err != nil {
				t.Fatal(err)
			}
			hb("pod-a", 1) // pod-a lives on
			for day := range 5 {
				hb(fmt.Sprintf("pod-%d", day), 1) // a pod a day, gone an hour later
				for range 24 {
					clk.Advance(time.Hour)
					hb("pod-a", 1)
					sweep()
				}
			}
			if n := count(""); n != 11 {
				t.Fatalf("%d transitions, want 11 (pod-a SYNCED; 5 pods SYNCED then GONE)", n)
			}
			for range 27 { // then pod-0 and pod-1 are more than 30 days old, pod-4 28 days
				clk.Advance(24 * time.Hour)
				hb("pod-a", 1)
				sweep()
			}
			if n := count("pod-0") + count("pod-1"); n != 0 {
				t.Fatalf("pod-0 and pod-1, forgotten, keep %d transitions older than 30 days", n)
			}
			if n := count("pod-4"); n != 2 {
				t.Fatalf("pod-4 keeps %d transitions, want its 2 of the last 30 days", n)
			}
			if n := count("pod-a"); n != 1 {
				t.Fatalf("pod-a keeps %d transitions, want its only one: older than 30 days, but the newest of a known instance", n)
			}
			if got := testutil.ToFloat64(l.pruned); got != 4 {
				t.Fatalf("pruned counter %v, want 4", got)
			}
			if err := l.Published(ctx, envelope(t, "checkout", 2), nil); err != nil {
				t.Fatal(err)
			}
			hb("pod-a", 2)
			clk.Advance(31 * 24 * time.Hour)
			hb("pod-a", 2)
			sweep()
			trs, err := store.Transitions(ctx, "checkout", "pod-a", 0)
			if err != nil || len(trs) != 1 || trs[0].To != StateSynced || trs[0].Running != 2 {
				t.Fatalf("pod-a's transitions %+v (%v), want only its newest (SYNCED on v2)", trs, err)
			}
		})
	}
}

// TestLedgerPrunesABacklogOneBatchPerSweep: a history that grew for long
// (before the retention existed) is deleted in bounded batches, one per
// sweep, so no delete holds the table for long.
func TestLedgerPrunesABacklogOneBatchPerSweep(t *testing.T) {
	for _, st := range ledgerStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewFake(time.Unix(1_700_000_000, 0))
			store := st.open(t)
			l, err := NewLedger(LedgerOptions{Store: store, Clock: clk, TransitionRetention: time.Hour, Registerer: prometheus.NewRegistry()})
			if err != nil {
				t.Fatal(err)
			}
			l.pruneBatch = 4
			for i := range 10 { // transitions of instances forgotten since
				tr := &Transition{Service: "checkout", Instance: fmt.Sprintf("old-%d", i), From: StateSynced, To: StateGone, At: clk.Now()}
				in := Instance{Service: "checkout", Instance: tr.Instance, State: StateGone, Since: clk.Now(), LastSeen: clk.Now()}
				if err := store.SaveInstance(ctx, nil, in, tr); err != nil {
					t.Fatal(err)
				}
				if err := store.DeleteInstance(ctx, in); err != nil {
					t.Fatal(err)
				}
			}
			clk.Advance(2 * time.Hour)
			var left []int
			for range 4 {
				if err := l.Sweep(ctx); err != nil {
					t.Fatal(err)
				}
				trs, err := store.Transitions(ctx, "checkout", "", 0)
				if err != nil {
					t.Fatal(err)
				}
				left = append(left, len(trs))
			}
			if fmt.Sprint(left) != "[6 2 0 0]" {
				t.Fatalf("transitions left after each sweep %v, want [6 2 0 0]: one batch of 4 per sweep", left)
			}
		})
	}
}

// downStore fails the reads of instances while down is set (the rules
// database restarting or failing over).
type downStore struct {
	LedgerStore
	down atomic.Bool
}

var errConnRefused = errors.New("connection refused")

func (d *downStore) Instance(ctx context.Context, service, instance string) (Instance, bool, error) {
	if d.down.Load() {
		return Instance{}, false, errConnRefused
	}
	return d.LedgerStore.Instance(ctx, service, instance)
}

func (d *downStore) Instances(ctx context.Context, service string) ([]Instance, error) {
	if d.down.Load() {
		return nil, errConnRefused
	}
	return d.LedgerStore.Instances(ctx, service)
}

// fleetStates maps each instance of checkout to its state.
func fleetStates(t *testing.T, l *Ledger) map[string]State {
	t.Helper()
	ins, err := l.Instances(context.Background(), "checkout")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]State{}
	for _, in := range ins {
		out[in.Instance] = in.State
	}
	return out
}

// TestLedgerDoesNotMarkTheFleetGoneAfterTheStoreWasDown: while the rules
// database is down the ledger cannot record heartbeats; when it is back,
// the instances are given the gone period to be heard again instead of
// all turning GONE at the first sweep (false transitions, a live-instance
// count of zero for the engine). One that stays silent is GONE after it.
func TestLedgerDoesNotMarkTheFleetGoneAfterTheStoreWasDown(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	store := &downStore{LedgerStore: NewMemoryStore()}
	l := newTestLedger(t, store, clk)
	pods := []string{"pod-0", "pod-1", "pod-2"}
	hb := func(id string) error {
		return l.HandleHeartbeat(ctx, &watch.Heartbeat{Service: "checkout", Instance: id, Running: 1, IntervalMS: 10000})
	}
	if err := l.Published(ctx, envelope(t, "checkout", 1), nil); err != nil {
		t.Fatal(err)
	}
	for _, id := range pods {
		if err := hb(id); err != nil {
			t.Fatal(err)
		}
	}
	store.down.Store(true)
	for range 12 { // two minutes of heartbeats the ledger cannot record
		clk.Advance(10 * time.Second)
		for _, id := range pods {
			if err := hb(id); err == nil {
				t.Fatal("recorded while the store is down")
			}
		}
		if err := l.Sweep(ctx); err == nil {
			t.Fatal("swept while the store is down")
		}
	}
	store.down.Store(false)
	clk.Advance(time.Second)
	if err := hb("pod-0"); err != nil {
		t.Fatal(err)
	}
	if err := l.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	for id, s := range fleetStates(t, l) {
		if s != StateSynced {
			t.Errorf("%s %s right after the store came back, want SYNCED: the ledger could not hear it", id, s)
		}
	}
	for range 4 {
		clk.Advance(10 * time.Second)
		for _, id := range pods[:2] {
			if err := hb(id); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]State{"pod-0": StateSynced, "pod-1": StateSynced, "pod-2": StateGone}
	if got := fleetStates(t, l); !maps.Equal(got, want) {
		t.Fatalf("states %v 40s after the store came back, want %v", got, want)
	}
}

// runLedger runs l on nc with a fake clock until the test ends and returns
// a function that advances the clock by one Sweep period and waits for
// Run's sweep (Run arms its next timer after the sweep).
func runLedger(t *testing.T, l *Ledger, nc *nats.Conn, clk *clock.Fake) (sweep func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Run(ctx, nc) }()
	t.Cleanup(func() { cancel(); <-done })
	eventually(t, "the ledger's sweep timer", func() bool { return clk.Pending() == 1 })
	return func() {
		t.Helper()
		clk.Advance(l.o.Sweep)
		eventually(t, "the sweep", func() bool { return clk.Pending() == 1 })
	}
}

// TestLedgerDoesNotMarkTheFleetGoneWhileNATSIsDown: without its NATS
// connection the ledger hears nobody; it does not declare the fleet GONE,
// and after the reconnection it gives every instance the gone period to be
// heard again.
func TestLedgerDoesNotMarkTheFleetGoneWhileNATSIsDown(t *testing.T) {
	srv := embedded(t)
	nc := connect(t, srv.URL())
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	l, err := NewLedger(LedgerOptions{Store: NewMemoryStore(), Names: uniqueNames(t), Clock: clk, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	sweep := runLedger(t, l, nc, clk)
	hb := func(id string) {
		t.Helper()
		if err := l.HandleHeartbeat(ctx, &watch.Heartbeat{Service: "checkout", Instance: id, Running: 1, IntervalMS: 10000}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Published(ctx, envelope(t, "checkout", 1), nil); err != nil {
		t.Fatal(err)
	}
	hb("pod-0")
	hb("pod-1")
	srv.Stop()
	eventually(t, "the disconnection", func() bool { return !nc.IsConnected() })
	for range 12 {
		sweep()
	}
	if got := fleetStates(t, l); got["pod-0"] == StateGone || got["pod-1"] == StateGone {
		t.Fatalf("states %v after a minute without NATS, want nobody GONE: the ledger heard nobody", got)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the reconnection", func() bool { return nc.IsConnected() })
	sweep()
	if got := fleetStates(t, l); got["pod-0"] == StateGone || got["pod-1"] == StateGone {
		t.Fatalf("states %v right after NATS came back, want nobody GONE", got)
	}
	for range 8 {
		hb("pod-0")
		sweep()
	}
	want := map[string]State{"pod-0": StateSynced, "pod-1": StateGone}
	if got := fleetStates(t, l); !maps.Equal(got, want) {
		t.Fatalf("states %v 40s after NATS came back, want %v", got, want)
	}
}

// TestLedgerStartedAfterADowntimeGivesTheFleetTimeToBeHeard: a ledger that
// starts (an engine deploy, every replica down for minutes) finds records
// last seen before its downtime; its first sweeps do not turn them GONE
// before the instances had the gone period to be heard.
func TestLedgerStartedAfterADowntimeGivesTheFleetTimeToBeHeard(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	store := NewMemoryStore()
	before := newTestLedger(t, store, clk)
	if err := before.Published(ctx, envelope(t, "checkout", 1), nil); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"pod-0", "pod-1"} {
		if err := before.HandleHeartbeat(ctx, &watch.Heartbeat{Service: "checkout", Instance: id, Running: 1, IntervalMS: 10000}); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(5 * time.Minute) // no ledger runs
	l, err := NewLedger(LedgerOptions{Store: store, Names: uniqueNames(t), Clock: clk, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	sweep := runLedger(t, l, connect(t, embedded(t).URL()), clk)
	sweep()
	if got := fleetStates(t, l); got["pod-0"] == StateGone || got["pod-1"] == StateGone {
		t.Fatalf("states %v at the first sweep after the start, want nobody GONE yet", got)
	}
	for range 8 {
		if err := l.HandleHeartbeat(ctx, &watch.Heartbeat{Service: "checkout", Instance: "pod-0", Running: 1, IntervalMS: 10000}); err != nil {
			t.Fatal(err)
		}
		sweep()
	}
	want := map[string]State{"pod-0": StateSynced, "pod-1": StateGone}
	if got := fleetStates(t, l); !maps.Equal(got, want) {
		t.Fatalf("states %v 40s after the start, want %v", got, want)
	}
}

// hangingStore is a ledger store whose instance writes wait for their
// context: a database that stops answering without refusing.
type hangingStore struct{ *MemoryStore }

func (hangingStore) SaveInstance(ctx context.Context, _ *Instance, _ Instance, _ *Transition) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestLedgerRecordGivesUpOnAStoreThatDoesNotAnswer: a store that hung
// held the ledger's one loop until the TCP timeout (minutes), every other
// message waiting or dropped. Recording a message is bounded by
// RecordTimeout and counted as failed.
func TestLedgerRecordGivesUpOnAStoreThatDoesNotAnswer(t *testing.T) {
	reg := prometheus.NewRegistry()
	l, err := NewLedger(LedgerOptions{Store: hangingStore{NewMemoryStore()}, Registerer: reg, RecordTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.record(context.Background(), natsMsg(l.o.Names.HeartbeatSubject("s"), `{"service":"s","instance":"i","running":1}`))
	}()
	select {
	case <-done:
	case <-time.After(time.Minute): // a guard against hanging the suite, not a timing claim
		t.Fatal("record still waiting for a store that does not answer")
	}
	if got := counterValue2(t, reg, "governor_distribution_ledger_messages_total", map[string]string{"kind": "heartbeat", "result": "failed"}); got != 1 {
		t.Fatalf("failed heartbeats %v, want 1", got)
	}
}

// stuckSweepStore is a ledger store whose reads of every instance, or
// whose prunes, wait for their context: a database that stops answering
// without refusing.
type stuckSweepStore struct {
	*MemoryStore
	instances, prune bool
}

func (s stuckSweepStore) Instances(ctx context.Context, service string) ([]Instance, error) {
	if s.instances {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.MemoryStore.Instances(ctx, service)
}

func (s stuckSweepStore) PruneTransitions(ctx context.Context, before time.Time, limit int) (int, error) {
	if s.prune {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return s.MemoryStore.PruneTransitions(ctx, before, limit)
}

// TestLedgerSweepGivesUpOnAStoreThatDoesNotAnswer: a sweep whose store
// hung (reading the instances, or pruning) held the ledger's one loop
// until the TCP timeout, every message waiting behind it. A sweep of Run is
// bounded by SweepTimeout, and the next message is recorded.
func TestLedgerSweepGivesUpOnAStoreThatDoesNotAnswer(t *testing.T) {
	tests := []struct {
		name  string
		store stuckSweepStore
	}{
		{"instances", stuckSweepStore{MemoryStore: NewMemoryStore(), instances: true}},
		{"prune", stuckSweepStore{MemoryStore: NewMemoryStore(), prune: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc := connect(t, embedded(t).URL())
			clk := clock.NewFake(time.Unix(1_700_000_000, 0))
			names := uniqueNames(t)
			l, err := NewLedger(LedgerOptions{Store: tt.store, Names: names, Clock: clk, Registerer: prometheus.NewRegistry(),
				SweepTimeout: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			sweep := runLedger(t, l, nc, clk)
			sweep() // returns once the loop set its next sweep timer
			if err := nc.Publish(names.HeartbeatSubject("checkout"), []byte(`{"service":"checkout","instance":"pod-0","running":1}`)); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the heartbeat recorded after the stuck sweep", func() bool {
				_, ok, err := tt.store.Instance(context.Background(), "checkout", "pod-0")
				return err == nil && ok
			})
		})
	}
}

// hangingTargetStore is a ledger store whose target reads wait for their
// context: a database that stops answering without refusing.
type hangingTargetStore struct{ *MemoryStore }

func (hangingTargetStore) Target(ctx context.Context, _ string) (Target, bool, error) {
	<-ctx.Done()
	return Target{}, false, ctx.Err()
}

// TestLedgerPublishedGivesUpOnAStoreThatDoesNotAnswer: the relay tells the
// ledger of a publication under its own context, which has no deadline; a
// database that stopped answering held the relay (no other version went
// out) and, through the ledger's lock, the ledger's loop (every ack and
// heartbeat waiting or dropped) until the TCP timeout, minutes. Published
// and Aborted are bounded by SweepTimeout; the relay retries the row, and
// the ledger records the next message.
func TestLedgerPublishedGivesUpOnAStoreThatDoesNotAnswer(t *testing.T) {
	reg := prometheus.NewRegistry()
	l, err := NewLedger(LedgerOptions{Store: hangingTargetStore{NewMemoryStore()}, Registerer: reg, SweepTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"Published": func() error {
			return l.Published(context.Background(), &rules.Envelope{Service: "s", Version: 2, Checksum: "c"}, nil)
		},
		"Aborted": func() error { return l.Aborted(context.Background(), "s") },
	} {
		done := make(chan error, 1)
		go func() { done <- call() }()
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s: %v, want a deadline error", name, err)
			}
		case <-time.After(time.Minute): // a guard against hanging the suite, not a timing claim
			t.Fatalf("%s still waiting for a store that does not answer", name)
		}
	}
}
