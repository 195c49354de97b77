package manager

import (
	"context"
	"fmt"
	"testing"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/rule"
)

// BenchmarkStep is one steady-state evaluation step with 200 firing alerts
// (nothing due): rule evaluation, state and history persistence in SQLite,
// muting and dispatch.
func BenchmarkStep(b *testing.B) {
	h := newHarness(b)
	var svcs []string
	for i := range 200 {
		svcs = append(svcs, fmt.Sprintf("svc%03d", i))
	}
	h.db.set("load", svcs...)
	ctx := context.Background()
	for _, d := range []time.Duration{0, 30 * time.Second} {
		if err := h.m.Step(ctx, t0.Add(d)); err != nil {
			b.Fatal(err)
		}
	}
	if err := h.m.Idle(ctx); err != nil {
		b.Fatal(err)
	}
	now := t0.Add(time.Minute)
	b.ReportAllocs()
	for b.Loop() {
		if err := h.m.Step(ctx, now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStepStorm is one step in an alert storm: n firing alerts (a
// shared dependency down) over n/5 services, a P0 in every fourth of them
// muting the service's P1 and P2 (the default inhibition), several
// instances per service. The steps run inside the group wait, so the cost
// is deciding what is quiet and flushing, not sending.
func BenchmarkStepStorm(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			h := newHarness(b)
			h.close()
			h.rules = []rule.Rule{
				{Name: "DependencyDown", Expr: "down", Severity: alerts.P0},
				{Name: "HighLoad", Expr: "load", Severity: alerts.P1},
				{Name: "Shedding", Expr: "shed", Severity: alerts.P2},
			}
			h.open()
			svcs := n / 5
			series := map[string][]rule.Sample{}
			for i := range n {
				svc := i % svcs
				expr := "shed"
				switch {
				case i < svcs && svc%4 == 0:
					expr = "down"
				case i%2 == 0:
					expr = "load"
				}
				series[expr] = append(series[expr], rule.Sample{Value: 1,
					Labels: map[string]string{"service": fmt.Sprintf("svc%04d", svc), "instance": fmt.Sprintf("i%d", i/svcs)}})
			}
			h.db.mu.Lock()
			h.db.series = series
			h.db.mu.Unlock()
			ctx := context.Background()
			for _, d := range []time.Duration{0, 10 * time.Second} {
				if err := h.m.Step(ctx, t0.Add(d)); err != nil {
					b.Fatal(err)
				}
			}
			if got := len(h.m.Alerts(t0)); got != n {
				b.Fatalf("%d alerts, want %d", got, n)
			}
			now := t0.Add(10 * time.Second)
			b.ReportAllocs()
			for b.Loop() {
				if err := h.m.Step(ctx, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAcknowledgeStorm is one acknowledgement among 10,000 firing
// alerts, as when an operator acknowledges a storm alert by alert: finding
// the alert, storing the acknowledgement, telling the dispatcher.
func BenchmarkAcknowledgeStorm(b *testing.B) {
	const n = 10000
	h := newHarness(b)
	var svcs []string
	var fps []alerts.Fingerprint
	for i := range n {
		svc := fmt.Sprintf("svc%05d", i)
		svcs = append(svcs, svc)
		fps = append(fps, alerts.Labels{"alertname": "Load", "service": svc, "severity": "P1"}.Fingerprint())
	}
	h.db.set("load", svcs...)
	ctx := context.Background()
	if err := h.m.Step(ctx, t0); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := h.m.Acknowledge(ctx, fps[i%n], "ops", "storm", t0); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
