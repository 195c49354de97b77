package distribution

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/migrations"
	"governor.dev/governor/sdk/watch"
)

// fleetServices and fleetPerService make the fleet of the ledger
// benchmarks: 10,000 instances.
const (
	fleetServices   = 20
	fleetPerService = 500
)

// fleetLedger is a ledger on the machine PostgreSQL that has heard every
// instance of the fleet once (each SYNCED on v1).
func fleetLedger(b *testing.B) *Ledger {
	b.Helper()
	db := openSQL(b, "pgx", machinePostgres(b), migrations.Postgres)
	l, err := NewLedger(LedgerOptions{Store: NewSQLStore(db), Registerer: prometheus.NewRegistry()})
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
	return l
}

// BenchmarkLedgerHeartbeatsAtFleetScale records heartbeats of a fleet of
// 10,000 instances, round robin, on PostgreSQL: what the ledger's one loop
// (Run) sustains. Every fleet-size heartbeats/s above 10,000 / interval
// (1,000/s at the SDK's default 10s) is headroom.
func BenchmarkLedgerHeartbeatsAtFleetScale(b *testing.B) {
	if testing.Short() {
		b.Skip("-short: no machine PostgreSQL")
	}
	l := fleetLedger(b)
	ctx := context.Background()
	n := fleetServices * fleetPerService
	b.ResetTimer()
	start := time.Now()
	i := 0
	for b.Loop() {
		h := &watch.Heartbeat{Service: fmt.Sprintf("svc-%d", i%fleetServices), Instance: fmt.Sprintf("pod-%d", i%n),
			Running: 1, IntervalMS: 10000}
		if err := l.HandleHeartbeat(ctx, h); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "heartbeats/s")
}

// BenchmarkLedgerAcksAtFleetScale records the ACKs of a fleet of 10,000
// instances applying v2, on PostgreSQL: each moves the instance's record
// (and its state, with a transition, once the target is v2).
func BenchmarkLedgerAcksAtFleetScale(b *testing.B) {
	if testing.Short() {
		b.Skip("-short: no machine PostgreSQL")
	}
	l := fleetLedger(b)
	ctx := context.Background()
	n := fleetServices * fleetPerService
	b.ResetTimer()
	start := time.Now()
	i := 0
	for b.Loop() {
		v := int64(2 + i/n) // each round of the fleet applies the next version
		r := &watch.Report{Service: fmt.Sprintf("svc-%d", i%fleetServices), Instance: fmt.Sprintf("pod-%d", i%n),
			Status: watch.StatusACK, Version: v, Running: v}
		if err := l.HandleReport(ctx, r); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "acks/s")
}
