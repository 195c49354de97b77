package backtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/engine/signals"
)

// partialCPU is a source whose CPU queries answer with a
// partial-data warning (a store of a federated query did not answer)
// between from and to.
type partialCPU struct {
	signals.Source
	from, to time.Time
}

func (p partialCPU) Query(ctx context.Context, q string, at time.Time) (*signals.Result, error) {
	res, err := p.Source.Query(ctx, q, at)
	if err != nil || at.Before(p.from) || !at.Before(p.to) || !strings.Contains(q, "process_cpu_seconds_total") {
		return res, err
	}
	out := *res
	out.Warnings = append(append([]string{}, res.Warnings...), "failed to receive any data from Addr: store-2:10901: context deadline exceeded")
	return &out, nil
}

// TestReplayHoldsProposalsOnPartialDataAsTheLiveEngineDoes: the live
// engine proposes nothing for a service whose signals read as partial (a
// query warned that data may be missing); a replay that proposed there
// would show changes the engine never made. The replay holds them too,
// counts the steps inconclusive and names the first with its warning.
func TestReplayHoldsProposalsOnPartialDataAsTheLiveEngineDoes(t *testing.T) {
	db := record(t)
	o := options(db)
	from, to := t0.Add(10*time.Minute), t0.Add(20*time.Minute)
	o.Source = partialCPU{db, from, to}
	var got []Proposal
	sum, err := Run(context.Background(), o, func(p Proposal) { got = append(got, p) })
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range got {
		if !p.At.Before(from) && p.At.Before(to) {
			t.Errorf("proposal at %s on partial data, which the live engine holds: %s", p.At.Sub(t0), p.Reason)
		}
	}
	held := int(to.Sub(from) / o.Step)
	if sum.PartialSteps != held || !strings.HasPrefix(sum.FirstPartial, "2026-01-01T00:10:00Z: ") ||
		!strings.Contains(sum.FirstPartial, "store-2") || sum.Inconclusive < held {
		t.Fatalf("summary %+v: want %d partial steps, the first at 00:10 naming the warning, counted inconclusive", sum, held)
	}
}
