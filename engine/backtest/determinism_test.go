package backtest

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/engine/signals"
)

// TestReplayIsDeterministic: the same recording, options and range give
// the same proposals and summary, byte for byte, on every run.
func TestReplayIsDeterministic(t *testing.T) {
	db := record(t)
	var first []byte
	for i := range 3 {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		sum, err := Run(context.Background(), options(db), func(p Proposal) { _ = enc.Encode(p) })
		if err != nil {
			t.Fatal(err)
		}
		if err := enc.Encode(sum); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = b.Bytes()
			continue
		}
		if !bytes.Equal(first, b.Bytes()) {
			t.Fatalf("run %d differs from the first:\n%s\n---\n%s", i, first, b.Bytes())
		}
	}
}

// gapped is a source that holds no series between from and to.
type gapped struct {
	signals.Source
	from, to time.Time
}

func (g gapped) Query(ctx context.Context, q string, at time.Time) (*signals.Result, error) {
	if !at.Before(g.from) && at.Before(g.to) {
		return &signals.Result{}, nil
	}
	return g.Source.Query(ctx, q, at)
}

// TestReplayProposesNothingInAGapAndSaysWhere: steps where the recording
// holds no series propose nothing, are not counted as steps with data, and
// the summary names the first of them and the signals missing.
func TestReplayProposesNothingInAGapAndSaysWhere(t *testing.T) {
	db := record(t)
	o := options(db)
	from, to := t0.Add(12*time.Minute), t0.Add(17*time.Minute)
	o.Source = gapped{db, from, to}
	var got []Proposal
	sum, err := Run(context.Background(), o, func(p Proposal) { got = append(got, p) })
	if err != nil {
		t.Fatal(err)
	}
	gap := int(to.Sub(from) / o.Step)
	if sum.StepsWithData != sum.Steps-gap || sum.FailedReads != gap {
		t.Fatalf("summary %+v: want %d steps without data of %d", sum, gap, sum.Steps)
	}
	if !strings.HasPrefix(sum.FirstFailure, "2026-01-01T00:12:00Z: ") || !strings.Contains(sum.FirstFailure, "latency_p99 (service)") {
		t.Fatalf("first failure %q does not name the gap's start and signals", sum.FirstFailure)
	}
	for _, p := range got {
		if !p.At.Before(from) && p.At.Before(to) {
			t.Errorf("proposal at %s inside the gap: %s", p.At.Sub(t0), p.Reason)
		}
	}
	if len(got) == 0 {
		t.Fatal("no proposal around the gap")
	}
}
