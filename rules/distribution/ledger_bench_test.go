package distribution

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/migrations"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/watch"
)

// fleetServices and fleetPerService make the fleet of the ledger
// benchmarks: 10,000 instances.
const (
	fleetServices   = 20
	fleetPerService = 500
)

// fleetTarget is the rate (messages/s) the ledger must sustain: twice what
// the fleet sends at the SDK's default heartbeat interval (10,000 / 10s),
// so that a burst (a rollout's ACKs on top of the heartbeats, a fleet
// restarting) or a slower disk does not fill the buffer.
const fleetTarget = 2 * fleetServices * fleetPerService / 10

// fleetLedger is a ledger on the machine PostgreSQL that has heard every
// instance of the fleet once (each SYNCED on v1).
func fleetLedger(b *testing.B) (*Ledger, *prometheus.Registry) {
	b.Helper()
	db := openSQL(b, "pgx", machinePostgres(b), migrations.Postgres)
	reg := prometheus.NewRegistry()
	l, err := NewLedger(LedgerOptions{Store: NewSQLStore(db), Registerer: reg})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for s := range fleetServices {
		svc := fmt.Sprintf("svc-%d", s)
		if err := l.o.Store.SetTarget(ctx, nil, Target{Service: svc, Stable: 1, StableAt: time.Now()}); err != nil {
			b.Fatal(err)
		}
	}
	// Seeded in SQL: 10,000 heartbeats through the ledger would take
	// longer than the measurement.
	if _, err := db.ExecContext(ctx, `INSERT INTO delivery_instances (`+instanceColumns+`)
		SELECT 'svc-' || (i % $1), 'pod-' || i, '{}', 1, 1, 'SYNCED', $2, $2, 10000, 1, 0, '', '', NULL, NULL
		FROM generate_series(0, $3 - 1) AS i`, fleetServices, time.Now().UTC(), fleetServices*fleetPerService); err != nil {
		b.Fatal(err)
	}
	return l, reg
}

// benchmarkFleet feeds the ledger the fleet's messages (msg(i) is the
// i-th, as JSON on subject) the way Run does when they arrive faster than
// it records them: maxBatch at a time. It reports the rate as unit and
// fails below fleetTarget, or if a message was not recorded.
func benchmarkFleet(b *testing.B, unit, kind string, msg func(i int) (subject string, v any)) {
	if testing.Short() {
		b.Skip("-short: no machine PostgreSQL")
	}
	l, reg := fleetLedger(b)
	ctx := context.Background()
	pending := make([]*nats.Msg, 0, maxBatch)
	b.ResetTimer()
	start := time.Now()
	i := 0
	for b.Loop() {
		subject, v := msg(i)
		data, err := json.Marshal(v)
		if err != nil {
			b.Fatal(err)
		}
		pending = append(pending, &nats.Msg{Subject: subject, Data: data})
		if len(pending) == maxBatch {
			l.recordBatch(ctx, pending)
			pending = pending[:0]
		}
		i++
	}
	l.recordBatch(ctx, pending)
	rate := float64(b.N) / time.Since(start).Seconds()
	b.StopTimer()
	b.ReportMetric(rate, unit)
	if got := counterValue2(b, reg, "governor_distribution_ledger_messages_total", map[string]string{"kind": kind, "result": "recorded"}); got != float64(b.N) {
		b.Fatalf("%v of %d messages recorded", got, b.N)
	}
	if b.N >= maxBatch && rate < fleetTarget {
		b.Errorf("%.0f %s, want at least %d: a fleet of %d instances heartbeating every 10s would fill the buffer",
			rate, unit, fleetTarget, fleetServices*fleetPerService)
	}
}

// BenchmarkLedgerHeartbeatsAtFleetScale records heartbeats of a fleet of
// 10,000 instances, round robin, on PostgreSQL: what the ledger's one loop
// (Run) sustains. Every fleet-size heartbeats/s above 10,000 / interval
// (1,000/s at the SDK's default 10s) is headroom.
func BenchmarkLedgerHeartbeatsAtFleetScale(b *testing.B) {
	n := fleetServices * fleetPerService
	names := watch.Names{}
	benchmarkFleet(b, "heartbeats/s", "heartbeat", func(i int) (string, any) {
		svc := fmt.Sprintf("svc-%d", i%fleetServices)
		return names.HeartbeatSubject(svc), &watch.Heartbeat{Service: svc, Instance: fmt.Sprintf("pod-%d", i%n),
			Running: 1, IntervalMS: 10000}
	})
}

// BenchmarkLedgerAcksAtFleetScale records the ACKs of a fleet of 10,000
// instances applying v2, on PostgreSQL: each moves the instance's record
// (and its state, with a transition, once the target is v2).
func BenchmarkLedgerAcksAtFleetScale(b *testing.B) {
	n := fleetServices * fleetPerService
	names := watch.Names{}
	benchmarkFleet(b, "acks/s", "ack", func(i int) (string, any) {
		svc := fmt.Sprintf("svc-%d", i%fleetServices)
		v := int64(2 + i/n) // each round of the fleet applies the next version
		return names.ReportSubject(svc), &watch.Report{Service: svc, Instance: fmt.Sprintf("pod-%d", i%n),
			Status: watch.StatusACK, Version: v, Running: v}
	})
}

// BenchmarkLedgerPublished records a publication to a service of n
// instances: the new stable version moves every instance's target, so
// each one is evaluated and written (what holds the ledger's lock, and so
// its message loop, while it runs). A LedgerBatchStore writes them in
// batches (one commit each), any other store one at a time.
func BenchmarkLedgerPublished(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) LedgerStore
	}{
		{"memory", func(*testing.B) LedgerStore { return NewMemoryStore() }},
		{"sqlite", func(b *testing.B) LedgerStore {
			return NewSQLStore(openSQL(b, "sqlite", "file:"+filepath.Join(b.TempDir(), "ledger.db")+"?_pragma=busy_timeout(5000)", migrations.SQLite))
		}},
		{"postgres", func(b *testing.B) LedgerStore {
			return NewSQLStore(openSQL(b, "pgx", machinePostgres(b), migrations.Postgres))
		}},
	}
	for _, st := range stores {
		for _, n := range []int{1000, 10000} {
			b.Run(fmt.Sprintf("%s/instances=%d", st.name, n), func(b *testing.B) {
				ctx := context.Background()
				clk := clock.NewFake(time.Unix(1_700_000_000, 0))
				store := st.open(b)
				l, err := NewLedger(LedgerOptions{Store: store, Clock: clk, Registerer: prometheus.NewRegistry()})
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Published(ctx, envelope(b, "checkout", 1), nil); err != nil {
					b.Fatal(err)
				}
				seedSynced(b, store, "checkout", n, 1, clk.Now())
				v := int64(1)
				for b.Loop() {
					v++
					clk.Advance(time.Second)
					if err := l.Published(ctx, envelope(b, "checkout", v), nil); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "instances/s")
				if in, _, _ := store.Instance(ctx, "checkout", "pod-0"); in.Target != v {
					b.Fatalf("pod-0 %+v, want target v%d", in, v)
				}
			})
		}
	}
}

// seedSynced records n instances of service (pod-0 to pod-n-1) that run
// version v, SYNCED since at: in batches on a LedgerBatchStore (n
// heartbeats through the ledger would take longer than the measurement).
func seedSynced(b *testing.B, store LedgerStore, service string, n int, v int64, at time.Time) {
	b.Helper()
	ctx := context.Background()
	saves := make([]InstanceSave, 0, 1000)
	write := func() {
		if bs, ok := store.(LedgerBatchStore); ok {
			if _, err := bs.SaveInstances(ctx, saves); err != nil {
				b.Fatal(err)
			}
		} else {
			for _, s := range saves {
				if err := store.SaveInstance(ctx, nil, s.In, nil); err != nil {
					b.Fatal(err)
				}
			}
		}
		saves = saves[:0]
	}
	for i := range n {
		saves = append(saves, InstanceSave{In: Instance{Service: service, Instance: fmt.Sprintf("pod-%d", i), Running: v, Target: v,
			State: StateSynced, Since: at, LastSeen: at, HeartbeatMS: 10000, AckVersion: v}})
		if len(saves) == cap(saves) {
			write()
		}
	}
	write()
}
