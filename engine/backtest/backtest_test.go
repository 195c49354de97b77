package backtest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/recommend"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
	"governor.dev/governor/sdk/rules"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// record writes 30 minutes of a service with two instances at 46 req/s
// each, whose p99 latency jumps from about 50ms to about 500ms between
// minutes 10 and 20.
func record(t *testing.T) *embedded.DB {
	t.Helper()
	return recordPattern(t, 30*time.Minute, 15*time.Second, func(d time.Duration) bool { return d >= 10*time.Minute && d < 20*time.Minute })
}

// recordPattern writes a service with two instances at 46 req/s each for
// span, a sample every every, whose p99 latency is about 500ms while
// incident says so and about 50ms otherwise.
func recordPattern(t *testing.T, span, every time.Duration, incident func(since time.Duration) bool) *embedded.DB {
	t.Helper()
	db, err := embedded.Open(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	les := []float64{0.05, 0.25, 0.5, 1}
	var admitted, slow [2]float64
	var buckets [2][4]float64
	for at := t0; !at.After(t0.Add(span)); at = at.Add(every) {
		in := incident(at.Sub(t0))
		app := db.Appender(context.Background())
		for i := range 2 {
			n := 46.0 * every.Seconds()
			admitted[i] += n
			share := []float64{0.995, 1, 1, 1}
			if in {
				share = []float64{0.05, 0.5, 1, 1}
				slow[i] += n * 0.001
			}
			for k := range les {
				buckets[i][k] += n * share[k]
			}
			base := []string{"job", "governor", "instance", fmt.Sprintf("10.0.0.%d:80", i), "service", "checkout"}
			add := func(v float64, kv ...string) {
				if _, err := app.Append(0, labels.FromStrings(append(append([]string{}, base...), kv...)...), at.UnixMilli(), v); err != nil {
					t.Fatal(err)
				}
			}
			add(admitted[i], "__name__", "governor_sdk_requests_total", "route", "api", "class", "core", "outcome", "admitted")
			add(slow[i], "__name__", "governor_sdk_request_errors_total", "route", "api", "class", "core")
			for k, le := range les {
				add(buckets[i][k], "__name__", "governor_sdk_request_duration_seconds_bucket", "route", "api", "le", strconv.FormatFloat(le, 'g', -1, 64))
			}
			add(admitted[i], "__name__", "governor_sdk_request_duration_seconds_bucket", "route", "api", "le", "+Inf")
			add(1, "__name__", "governor_sdk_rules_version")
		}
		if err := app.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

func options(db *embedded.DB) Options {
	ro := recommend.DefaultOptions()
	ro.Thresholds.MinSamples = 5
	return Options{
		Source: db, Service: "checkout", From: t0.Add(2 * time.Minute), To: t0.Add(30 * time.Minute), Step: 15 * time.Second,
		Ruleset: &rules.Ruleset{Service: "checkout", Routes: []rules.Route{{Name: "api", Match: rules.Match{PathPrefix: "/"},
			RateLimit: &rules.RateLimit{Rate: 60}}}},
		LoadScore: loadscore.Options{Weights: loadscore.Weights{loadscore.Latency: 1}},
		Recommend: ro, Band: recommend.DefaultBand(),
		Reader: signals.ReaderOptions{Window: time.Minute},
	}
}

func TestReplayProposesDuringTheIncidentOnly(t *testing.T) {
	db := record(t)
	var got []Proposal
	sum, err := Run(context.Background(), options(db), func(p Proposal) { got = append(got, p) })
	if err != nil {
		t.Fatal(err)
	}
	if sum.Steps != 113 || sum.KnownScores != sum.Steps || sum.MaxScore < 0.9 {
		t.Fatalf("summary %+v", sum)
	}
	if len(got) == 0 {
		t.Fatalf("no proposal; summary %+v", sum)
	}
	auto, lowered, raised := 0, 0, 0
	for _, p := range got {
		d := p.At.Sub(t0)
		down := p.Evidence.Ceiling.To < p.Evidence.Ceiling.From
		switch {
		case d < 10*time.Minute:
			t.Errorf("proposal at %s before the incident: %s", d, p.Reason)
		case d < 21*time.Minute && down:
			lowered++
		case d >= 20*time.Minute && !down:
			raised++ // the ceiling returns after the incident
		default:
			t.Errorf("proposal at %s moves the wrong way: %s", d, p.Reason)
		}
		if p.AutoApply {
			auto++
		}
	}
	if lowered == 0 || raised == 0 {
		t.Errorf("%d proposals lowered the ceiling in the incident, %d raised it after; want both", lowered, raised)
	}
	if got[0].Evidence.Ceiling.Instances != 2 || got[0].Version != 2 {
		t.Fatalf("first proposal %+v", got[0])
	}
	if auto != sum.AutoApplied || sum.Proposals != len(got) {
		t.Fatalf("summary %+v vs %d proposals, %d auto", sum, len(got), auto)
	}
	for _, p := range got {
		t.Logf("%s v%d auto=%v: %s", p.At.Sub(t0), p.Version, p.AutoApply, p.Reason)
	}
}

// failingCPU is a source whose CPU query always fails.
type failingCPU struct{ signals.Source }

func (f failingCPU) Query(ctx context.Context, q string, at time.Time) (*signals.Result, error) {
	if strings.Contains(q, "process_cpu_seconds_total") {
		return nil, errors.New("query timed out")
	}
	return f.Source.Query(ctx, q, at)
}

// TestReplayReportsFailedQueries: a query failing at every step leaves the
// replay running on the other signals, but the summary says so.
func TestReplayReportsFailedQueries(t *testing.T) {
	db := record(t)
	o := options(db)
	o.Source = failingCPU{db}
	sum, err := Run(context.Background(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.FailedReads != sum.Steps || !strings.Contains(sum.FirstFailure, "cpu (service): query timed out") ||
		!strings.HasPrefix(sum.FirstFailure, "2026-01-01T00:02:00Z: ") {
		t.Fatalf("summary %+v does not report the failed cpu query", sum)
	}
	sum, err = Run(context.Background(), options(db), nil)
	if err != nil || sum.FailedReads != 0 || sum.FirstFailure != "" {
		t.Fatalf("summary %+v (%v) reports failures of a healthy source", sum, err)
	}
}

func TestOptionsNameEveryError(t *testing.T) {
	_, err := Run(context.Background(), Options{Service: "bad service!", From: t0, To: t0}, nil)
	if !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("error %v", err)
	}
	for _, want := range []string{"Source", "service", "from", "Ruleset"} {
		if !contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	o := options(nil)
	o.Service = "catalog" // the ruleset is checkout's
	_, err = Run(context.Background(), o, nil)
	if !errors.Is(err, ErrInvalidOption) || !contains(err.Error(), `ruleset is for service "checkout", not "catalog"`) {
		t.Errorf("ruleset of another service: %v", err)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// stopAtFirstQuery is a source that counts its queries (which the
// signal reader makes concurrently) and cancels the replay's context at the
// first.
type stopAtFirstQuery struct {
	signals.Source
	queries *atomic.Int64
	cancel  context.CancelFunc
}

func (s stopAtFirstQuery) Query(context.Context, string, time.Time) (*signals.Result, error) {
	s.queries.Add(1)
	s.cancel()
	return nil, errors.New("stopped")
}

// TestReplayRefusesMoreThanMaxSteps: a month at a step of one second
// (2.6 million evaluations) is refused before any query, naming the step
// and the limit; one step fewer than the limit is not.
func TestReplayRefusesMoreThanMaxSteps(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var queries atomic.Int64
	o := options(nil)
	o.Source = stopAtFirstQuery{queries: &queries, cancel: cancel}
	o.From, o.To, o.Step = t0, t0.Add(30*24*time.Hour), time.Second
	_, err := Run(ctx, o, nil)
	if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "step 1s") ||
		!strings.Contains(err.Error(), "2592001 steps, more than the 100000 allowed") || queries.Load() != 0 {
		t.Fatalf("Run = %v after %d queries; want ErrInvalidOption naming the step and the limit, before any query", err, queries.Load())
	}
	o.To = t0.Add((MaxSteps - 1) * time.Second)
	if n := Steps(o.From, o.To, o.Step); n != MaxSteps {
		t.Fatalf("Steps = %d, want %d", n, MaxSteps)
	}
	if _, err := Run(ctx, o, nil); errors.Is(err, ErrInvalidOption) || queries.Load() == 0 {
		t.Fatalf("Run of MaxSteps = %v after %d queries; want it to start (and stop at the cancel)", err, queries.Load())
	}
}

// TestPruningTheAppliedChangesLeavesALongReplayUnchanged: a replay keeps
// only the self-applied changes of the band's last hour (it used to keep
// and scan all of them at every proposal, quadratic in a long replay), and
// its results are the same as when it keeps them all, over hours of
// changes both applied and refused.
func TestPruningTheAppliedChangesLeavesALongReplayUnchanged(t *testing.T) {
	span := 3 * time.Hour
	db := recordPattern(t, span, 30*time.Second, func(d time.Duration) bool { return d%(15*time.Minute) >= 10*time.Minute })
	o := options(db)
	o.From, o.To, o.Step = t0.Add(2*time.Minute), t0.Add(span), time.Minute
	o.Reader.Window = 2 * time.Minute
	o.Band.MaxChangePerHour = 0.8
	replay := func(applied *autoApplied) (Summary, []Proposal) {
		var got []Proposal
		sum, err := run(context.Background(), o, func(p Proposal) { got = append(got, p) }, applied)
		if err != nil {
			t.Fatal(err)
		}
		return sum, got
	}
	pruned, all := &autoApplied{prune: true}, &autoApplied{}
	sumPruned, gotPruned := replay(pruned)
	sumAll, gotAll := replay(all)
	if !reflect.DeepEqual(sumPruned, sumAll) || !reflect.DeepEqual(gotPruned, gotAll) {
		t.Fatalf("pruning changed the replay: %+v with, %+v without", sumPruned, sumAll)
	}
	for _, p := range gotAll {
		t.Logf("%s v%d auto=%v: %s", p.At.Sub(t0), p.Version, p.AutoApply, p.Policy)
	}
	refused := sumAll.Proposals - sumAll.AutoApplied
	if sumAll.AutoApplied < 10 || refused < 10 {
		t.Fatalf("summary %+v: want many changes applied and refused", sumAll)
	}
	end := gotAll[len(gotAll)-1].At
	if end.Sub(all.at[0]) < 2*recommend.BandWindow {
		t.Fatalf("summary %+v, changes applied from %s, last proposal at %s: want many changes applied and refused over hours",
			sumAll, all.at[0].Sub(t0), end.Sub(t0))
	}
	if len(pruned.at) >= len(all.at) {
		t.Fatalf("%d changes kept with pruning, %d without", len(pruned.at), len(all.at))
	}
	for _, at := range pruned.at {
		if end.Sub(at) > recommend.BandWindow {
			t.Fatalf("a change applied at %s kept at the last proposal (%s)", at.Sub(t0), end.Sub(t0))
		}
	}
}

// TestAutoAppliedReferenceIsTheOldestChangeWithinTheHour: with or without
// pruning, the reference is the ceiling the oldest change of the last hour
// (inclusive) replaced, as a scan of every change finds it; pruning keeps
// no more than the hour's changes.
func TestAutoAppliedReferenceIsTheOldestChangeWithinTheHour(t *testing.T) {
	pruned, all := &autoApplied{prune: true}, &autoApplied{}
	var everyAt []time.Time
	var everyFrom []float64
	at := t0
	for i := range 3000 {
		at = at.Add(10 * time.Second) // a change exactly an hour old counts
		cur := float64(i%97 + 1)
		want := cur
		for k := len(everyAt) - 1; k >= 0; k-- {
			if at.Sub(everyAt[k]) <= time.Hour {
				want = everyFrom[k]
			}
		}
		if a, b := pruned.reference(at, cur), all.reference(at, cur); a != want || b != want {
			t.Fatalf("step %d: reference %v with pruning, %v without, want %v", i, a, b, want)
		}
		if i%3 != 0 {
			pruned.add(at, cur)
			all.add(at, cur)
			everyAt, everyFrom = append(everyAt, at), append(everyFrom, cur)
		}
	}
	if n := len(pruned.at); n > 361 {
		t.Fatalf("%d changes kept after 3000 steps of 10s, want at most the hour's 361", n)
	}
}

// TestReplayWithoutDataSaysSo: a range before the recording, or a service
// name the source does not hold, replays without error but with
// StepsWithData 0, so the report can tell "no data" from "no proposal"; a
// recorded range has data at every step.
func TestReplayWithoutDataSaysSo(t *testing.T) {
	db := record(t)
	before := options(db)
	before.From, before.To = t0.Add(-48*time.Hour), t0.Add(-47*time.Hour)
	typo := options(db)
	typo.Service, typo.Ruleset.Service = "checkot", "checkot"
	for name, o := range map[string]Options{"range before the recording": before, "unknown service": typo} {
		sum, err := Run(context.Background(), o, nil)
		if err != nil || sum.Steps == 0 || sum.StepsWithData != 0 || sum.Proposals != 0 {
			t.Errorf("%s: summary %+v, err %v; want steps without data", name, sum, err)
		}
	}
	sum, err := Run(context.Background(), options(db), nil)
	if err != nil || sum.StepsWithData != sum.Steps {
		t.Fatalf("recorded range: summary %+v, err %v; want data at every step", sum, err)
	}
}
