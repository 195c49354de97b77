package manager

import (
	"context"
	"fmt"
	"testing"
	"time"
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
