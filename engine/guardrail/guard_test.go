package guardrail

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

var (
	alice = versioning.Actor{Name: "alice", Roles: []versioning.Role{versioning.RoleOperator}}
	bob   = versioning.Actor{Name: "bob", Roles: []versioning.Role{versioning.RoleApprover}}
)

// fakeSeries answers with a function of the metric and of whether the step
// lies after the switch time (value), or of the step's time (timed).
type fakeSeries struct {
	switchAt time.Time
	value    func(m Metric, after bool, i int) float64
	timed    func(m Metric, t time.Time, i int) float64
}

func (f fakeSeries) Samples(_ context.Context, _ string, m Metric, from, to time.Time, step time.Duration) ([]float64, error) {
	var out []float64
	i := 0
	for t := from; !t.After(to); t = t.Add(step) {
		var v float64
		if f.timed != nil {
			v = f.timed(m, t, i)
		} else {
			v = f.value(m, !t.Before(f.switchAt), i)
		}
		if !math.IsNaN(v) {
			out = append(out, v)
		}
		i++
	}
	return out, nil
}

func ruleset(rate float64) *rules.Ruleset {
	return &rules.Ruleset{Service: "checkout", Routes: []rules.Route{{Name: "api", Match: rules.Match{PathPrefix: "/"},
		RateLimit: &rules.RateLimit{Rate: rate}}}}
}

// liveVersions makes v1 and v2 live, v2 at the returned time.
func liveVersions(t *testing.T, clk *clock.Fake) (versioning.Store, time.Time) {
	t.Helper()
	ctx := context.Background()
	st := memStore(t, clk)
	for i, rate := range []float64{100, 10} {
		p, err := st.Propose(ctx, versioning.Proposal{BaseVersion: int64(i), Ruleset: ruleset(rate), Author: alice, Reason: "test"})
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(10 * time.Minute)
		if _, err := st.Approve(ctx, "checkout", p.Number, bob, "ok"); err != nil {
			t.Fatal(err)
		}
	}
	return st, clk.Now()
}

// healthy is a service at 500 requests/s that serves nearly all of them.
func healthy(m Metric, i int) float64 {
	jitter := float64(i%3) * 0.01
	switch m {
	case ErrorRatio:
		return 0.002 + jitter/10
	case LatencyP99:
		return 0.1 + jitter
	case OfferedLoad:
		return 500 + 1000*jitter
	case AdmittedShare:
		return 0.99 - jitter/10
	case GoodputShare:
		return (0.99 - jitter/10) * (1 - 0.002 - jitter/10)
	}
	panic("unknown metric " + string(m))
}

func TestGuard(t *testing.T) {
	tests := []struct {
		name     string
		value    func(m Metric, after bool, i int) float64
		advance  time.Duration
		verdict  Verdict
		final    bool
		rollback bool
		event    events.Kind
	}{
		{
			name: "error ratio regression rolls back",
			value: func(m Metric, after bool, i int) float64 {
				if after && m == ErrorRatio {
					return 0.2 + float64(i%2)*0.01
				}
				return healthy(m, i)
			},
			advance: 2 * time.Minute, verdict: Regression, final: true, rollback: true, event: events.AutoRollback,
		},
		{
			name: "goodput share drop rolls back",
			value: func(m Metric, after bool, i int) float64 {
				if after && m == GoodputShare {
					return 0.4 + float64(i%2)/100
				}
				return healthy(m, i)
			},
			advance: 2 * time.Minute, verdict: Regression, final: true, rollback: true, event: events.AutoRollback,
		},
		{
			name:    "healthy passes after the full window",
			value:   func(m Metric, after bool, i int) float64 { return healthy(m, i) },
			advance: 3 * time.Minute, verdict: Pass, final: true,
		},
		{
			name:    "healthy is still watched before the window is full",
			value:   func(m Metric, after bool, i int) float64 { return healthy(m, i) },
			advance: 90 * time.Second, verdict: Watching,
		},
		{
			name: "small rise within tolerance passes",
			value: func(m Metric, after bool, i int) float64 {
				if after && m == LatencyP99 {
					return healthy(m, i) * 1.1
				}
				return healthy(m, i)
			},
			advance: 3 * time.Minute, verdict: Pass, final: true,
		},
		{
			name: "no samples after is inconclusive, not a pass",
			value: func(m Metric, after bool, i int) float64 {
				if after {
					return math.NaN()
				}
				return healthy(m, i)
			},
			advance: 2 * time.Minute, verdict: Inconclusive,
		},
		{
			name: "inconclusive until the maximum wait is final and emitted",
			value: func(m Metric, after bool, i int) float64 {
				if after {
					return math.NaN()
				}
				return healthy(m, i)
			},
			advance: 7 * time.Minute, verdict: Inconclusive, final: true, event: events.GuardrailInconclusive,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			st, at := liveVersions(t, clk)
			rec := events.NewRecorder(10)
			g, err := New(Options{Store: st, Series: fakeSeries{switchAt: at.Add(30 * time.Second), value: tt.value},
				Window: 2 * time.Minute, Settle: 30 * time.Second, Step: 10 * time.Second, MinSamples: 6, Events: rec})
			if err != nil {
				t.Fatal(err)
			}
			var got Decision
			for clk.Now().Sub(at) < tt.advance {
				clk.Advance(10 * time.Second)
				act, err := st.Active(ctx, "checkout")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := g.Observe(ctx, clk.Now(), []versioning.Version{act}); err != nil {
					t.Fatal(err)
				}
				for _, d := range g.Decisions() {
					if d.Version == 2 {
						got = d
						break
					}
				}
				if got.Final {
					break
				}
			}
			if got.Verdict != tt.verdict || got.Final != tt.final {
				t.Fatalf("verdict %s final %v, want %s final %v (%s)", got.Verdict, got.Final, tt.verdict, tt.final, got.Reason)
			}
			act, _ := st.Active(ctx, "checkout")
			if tt.rollback {
				if got.RollbackVersion != act.Number || act.RollbackOf != 1 || act.Ruleset.Routes[0].RateLimit.Rate != 100 {
					t.Fatalf("active after rollback: v%d rollback_of %d; decision %+v", act.Number, act.RollbackOf, got)
				}
				if act.Author != "engine" || act.Reason == "" {
					t.Fatalf("rollback by %q with reason %q", act.Author, act.Reason)
				}
			} else if act.Number != 2 {
				t.Fatalf("active is v%d, want v2 untouched", act.Number)
			}
			evs := rec.Events("")
			if tt.event == "" && len(evs) != 0 || tt.event != "" && (len(evs) != 1 || evs[0].Kind != tt.event) {
				t.Fatalf("events %+v, want %q", evs, tt.event)
			}
		})
	}
}

// regressionGuard is a guard over st, with a recorder for its events, whose
// series show an error ratio of 0.5 from 30 s after at: every version live
// at at regresses.
func regressionGuard(t *testing.T, st versioning.Store, at time.Time) (*Guard, *events.Recorder) {
	t.Helper()
	bad := func(m Metric, after bool, i int) float64 {
		if after && m == ErrorRatio {
			return 0.5
		}
		return healthy(m, i)
	}
	rec := events.NewRecorder(10)
	g, err := New(Options{Store: st, Series: fakeSeries{switchAt: at.Add(30 * time.Second), value: bad}, Events: rec})
	if err != nil {
		t.Fatal(err)
	}
	return g, rec
}

func TestRollbackIsNotRolledBack(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st, at := liveVersions(t, clk)
	rb, err := st.Rollback(ctx, "checkout", 1, alice, "manual")
	if err != nil {
		t.Fatal(err)
	}
	g, _ := regressionGuard(t, st, at)
	clk.Advance(5 * time.Minute)
	final, err := g.Observe(ctx, clk.Now(), []versioning.Version{rb})
	if err != nil {
		t.Fatal(err)
	}
	if len(final) != 1 || final[0].Verdict != Regression || final[0].RollbackVersion != 0 {
		t.Fatalf("decisions %+v", final)
	}
	if act, _ := st.Active(ctx, "checkout"); act.Number != rb.Number {
		t.Fatalf("active v%d, want the rollback v%d kept", act.Number, rb.Number)
	}
}

// A version replaced after the cycle read the active versions (here a
// person's rollback) is judged but not rolled back: rolling back to its
// parent would undo the newer decision.
func TestReplacedVersionIsNotRolledBack(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st, at := liveVersions(t, clk)
	v2, err := st.Active(ctx, "checkout")
	if err != nil {
		t.Fatal(err)
	}
	g, rec := regressionGuard(t, st, at)
	clk.Advance(5 * time.Minute)
	manual, err := st.Rollback(ctx, "checkout", 1, alice, "manual")
	if err != nil {
		t.Fatal(err)
	}
	final, err := g.Observe(ctx, clk.Now(), []versioning.Version{v2})
	if err != nil {
		t.Fatal(err)
	}
	if len(final) != 1 || final[0].Verdict != Regression || final[0].RollbackVersion != 0 ||
		!strings.Contains(final[0].Reason, "not rolled back: v3 replaced it") {
		t.Fatalf("decisions %+v", final)
	}
	if act, _ := st.Active(ctx, "checkout"); act.Number != manual.Number {
		t.Fatalf("active v%d by %s, want the manual rollback v%d kept", act.Number, act.Author, manual.Number)
	}
	if evs := rec.Events(""); len(evs) != 0 {
		t.Fatalf("events %+v, want none", evs)
	}
}

func TestOptionsNameEveryError(t *testing.T) {
	_, err := New(Options{Window: -time.Second, Alpha: 0.9, MinSamples: 1, LoadRatio: 0.5})
	if err == nil {
		t.Fatal("bad options accepted")
	}
	for _, want := range []string{"Store", "Series", "Window", "Alpha", "MinSamples", "LoadRatio is 0.5"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

// racingStore commits a person's rollback to v1 just before the guardrail's
// rollback reaches the store: after any read the guardrail could make first.
type racingStore struct {
	versioning.Store
	manual versioning.Version
}

func (s *racingStore) person(ctx context.Context) error {
	var err error
	s.manual, err = s.Store.Rollback(ctx, "checkout", 1, alice, "manual")
	return err
}

func (s *racingStore) Rollback(ctx context.Context, service string, to int64, by versioning.Actor, reason string) (versioning.Version, error) {
	if err := s.person(ctx); err != nil {
		return versioning.Version{}, err
	}
	return s.Store.Rollback(ctx, service, to, by, reason)
}

func (s *racingStore) RollbackFrom(ctx context.Context, service string, from, to int64, by versioning.Actor, reason string) (versioning.Version, error) {
	if err := s.person(ctx); err != nil {
		return versioning.Version{}, err
	}
	return s.Store.RollbackFrom(ctx, service, from, to, by, reason)
}

// A person's rollback that commits between the guardrail's last read and its
// own rollback is kept: the store refuses the rollback of a version that is
// no longer active.
func TestRollbackRacingAPersonIsRefused(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	inner, at := liveVersions(t, clk)
	st := &racingStore{Store: inner}
	v2, err := st.Active(ctx, "checkout")
	if err != nil {
		t.Fatal(err)
	}
	g, rec := regressionGuard(t, st, at)
	clk.Advance(5 * time.Minute)
	final, err := g.Observe(ctx, clk.Now(), []versioning.Version{v2})
	if err != nil {
		t.Fatal(err)
	}
	if st.manual.Number != 3 {
		t.Fatalf("the person's rollback is v%d, want v3", st.manual.Number)
	}
	if len(final) != 1 || final[0].Verdict != Regression || final[0].RollbackVersion != 0 ||
		!strings.Contains(final[0].Reason, "(not rolled back: v3 replaced it since)") {
		t.Fatalf("decisions %+v", final)
	}
	if act, _ := st.Active(ctx, "checkout"); act.Number != 3 {
		t.Fatalf("active v%d by %s, want the person's rollback v3 kept", act.Number, act.Author)
	}
	if evs := rec.Events(""); len(evs) != 0 {
		t.Fatalf("events %+v, want none", evs)
	}
}

// refusesAll is healthy before the switch and refuses every request after
// it: the shed ratio is 1, nothing is admitted, so there is no error ratio
// and no p99 latency (0/0), and the admitted and goodput shares are 0.
func refusesAll(m Metric, after bool, i int) float64 {
	if !after {
		return consistent(func(m Metric, _ bool, i int) float64 { return healthy(m, i) })(m, after, i)
	}
	switch m {
	case OfferedLoad:
		return healthy(m, i)
	case ShedRatio:
		return 1
	case AdmittedShare, GoodputShare:
		return 0
	}
	return math.NaN()
}

// TestVersionRefusingEveryRequestRollsBack: a version that sheds all its
// traffic leaves no error ratio or p99 to compare, but its goodput share
// fell from 0.99 to 0: it is a regression and is rolled back, whether the
// guard reads each service alone or derives the shares from batched grid
// points (where the goodput of a step with no error ratio was unknown, so
// the version ended "inconclusive" and stayed live).
func TestVersionRefusingEveryRequestRollsBack(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batched=%v", batch), func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			st, at := liveVersions(t, clk)
			cs := &countingSeries{by: map[string]fakeSeries{"checkout": {switchAt: at.Add(30 * time.Second), value: refusesAll}}}
			var s Series = cs
			if batch {
				s = batched{cs}
			}
			g, err := New(Options{Store: st, Series: s})
			if err != nil {
				t.Fatal(err)
			}
			var got Decision
			for clk.Now().Sub(at) < 8*time.Minute && !got.Final {
				clk.Advance(10 * time.Second)
				act, err := st.Active(ctx, "checkout")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := g.Observe(ctx, clk.Now(), []versioning.Version{act}); err != nil {
					t.Fatal(err)
				}
				for _, d := range g.Decisions() {
					if d.Version == 2 {
						got = d
						break
					}
				}
			}
			if got.Verdict != Regression || got.RollbackVersion == 0 || !strings.Contains(got.Reason, "goodput share 0.9") {
				t.Fatalf("verdict %s final %v rollback v%d: %s", got.Verdict, got.Final, got.RollbackVersion, got.Reason)
			}
		})
	}
}

// silentAfter is healthy before the switch and has no sample at all after
// it: no instance reports.
func silentAfter(m Metric, after bool, i int) float64 {
	if after {
		return math.NaN()
	}
	return consistent(func(m Metric, _ bool, i int) float64 { return healthy(m, i) })(m, after, i)
}

// snapshotAt is the evaluator's snapshot at at: checkout as f says (after:
// from switchAt on), and, with others, a healthy cart.
func snapshotAt(at time.Time, f fakeSeries, others bool) *signals.Snapshot {
	snap := &signals.Snapshot{At: at, Scope: signals.PerService, Entries: map[signals.Key]*signals.Entry{}, Errors: map[signals.Signal]error{}}
	checkout := &signals.Entry{Key: signals.Key{Service: "checkout"}, Values: map[signals.Signal]signals.Value{}}
	for i, m := range baseMetrics {
		if v := f.value(m, !at.Before(f.switchAt), 0); !math.IsNaN(v) {
			checkout.Values[baseSignals[i]] = signals.KnownValue(v)
		}
	}
	if len(checkout.Values) > 0 {
		snap.Entries[checkout.Key] = checkout
	}
	if others {
		cart := &signals.Entry{Key: signals.Key{Service: "cart"}, Values: map[signals.Signal]signals.Value{
			signals.RequestRate: signals.KnownValue(100), signals.ErrorRatio: signals.KnownValue(0.001),
			signals.LatencyP99: signals.KnownValue(0.1), signals.ShedRatio: signals.KnownValue(0.01)}}
		snap.Entries[cart.Key] = cart
	}
	return snap
}

// TestVersionAfterWhichNoInstanceReports: a version after which no
// instance of its service reports any signal, while it had traffic before,
// is no pass and is not left unjudged: once a full window is silent it is
// rolled back when its instances are still heard from (delivery ledger)
// and other services report meanwhile (they crash-loop or report nothing);
// otherwise (the service gone from the ledger as well, as when it was
// removed on purpose, no ledger at all, the whole fleet silent, or series
// read service by service) it is flagged: final inconclusive at MaxWait
// with an event saying "no instance reported" and why it was not rolled
// back. A service without traffic before, or whose traffic stopped while
// its series remain (a rate of 0), is not "silent".
func TestVersionAfterWhichNoInstanceReports(t *testing.T) {
	zeroBefore := func(m Metric, after bool, i int) float64 {
		if !after && m == OfferedLoad {
			return 0
		}
		return silentAfter(m, after, i)
	}
	idleAfter := func(m Metric, after bool, i int) float64 {
		if after && m == OfferedLoad {
			return 0
		}
		return silentAfter(m, after, i)
	}
	tests := []struct {
		name     string
		value    func(m Metric, after bool, i int) float64
		batched  bool
		heard    string // "now", "before" (last heartbeat before activation), "" (never noted)
		others   bool   // another service reports meanwhile
		verdict  Verdict
		rollback bool
		event    events.Kind
		reason   string
	}{
		{name: "instances heard from: rolled back", value: silentAfter, batched: true, heard: "now", others: true,
			verdict: Regression, rollback: true, event: events.AutoRollback,
			reason: "no instance reported after v2: offered load 510.0/s before activation (12 samples), no sample of any signal from 2026-01-01T00:20:30Z to 2026-01-01T00:22:30Z, though an instance was heard from at 2026-01-01T00:22:25Z"},
		{name: "instances gone since activation: flagged", value: silentAfter, batched: true, heard: "before", others: true,
			verdict: Inconclusive, event: events.GuardrailInconclusive,
			reason: "not rolled back: no instance heard from since 2026-01-01T00:19:55Z (delivery ledger), the service may have been removed on purpose"},
		{name: "no ledger: flagged", value: silentAfter, batched: true, others: true, verdict: Inconclusive, event: events.GuardrailInconclusive,
			reason: "not rolled back: no instance known to the delivery ledger"},
		{name: "whole fleet silent: flagged", value: silentAfter, batched: true, heard: "now", verdict: Inconclusive, event: events.GuardrailInconclusive,
			reason: "no other service reported over that span either (the metrics pipeline may be failing)"},
		{name: "read service by service: flagged", value: silentAfter, heard: "now", verdict: Inconclusive, event: events.GuardrailInconclusive,
			reason: "whether other services reported meanwhile is unknown"},
		{name: "no traffic before: not silent", value: zeroBefore, batched: true, heard: "now", others: true,
			verdict: Inconclusive, event: events.GuardrailInconclusive, reason: "offered_load: 12 samples before and 0 after"},
		{name: "traffic stopped, series remain: not silent", value: idleAfter, batched: true, heard: "now", others: true,
			verdict: Inconclusive, event: events.GuardrailInconclusive, reason: "offered load 510.0/s -> 0.0/s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			st, at := liveVersions(t, clk)
			cs := &countingSeries{by: map[string]fakeSeries{"checkout": {switchAt: at, value: tt.value}}}
			var s Series = cs
			if tt.batched {
				s = batched{cs}
			}
			rec := events.NewRecorder(10)
			g, err := New(Options{Store: st, Series: s, Events: rec})
			if err != nil {
				t.Fatal(err)
			}
			var got Decision
			for clk.Now().Sub(at) < 8*time.Minute && !got.Final {
				clk.Advance(10 * time.Second)
				switch tt.heard {
				case "now":
					g.NoteHeartbeats(map[string]time.Time{"checkout": clk.Now().Add(-5 * time.Second)})
				case "before":
					g.NoteHeartbeats(map[string]time.Time{"checkout": at.Add(-5 * time.Second)})
				}
				g.Record(snapshotAt(clk.Now(), cs.by["checkout"], tt.others))
				act, err := st.Active(ctx, "checkout")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := g.Observe(ctx, clk.Now(), []versioning.Version{act}); err != nil {
					t.Fatal(err)
				}
				for _, d := range g.Decisions() {
					if d.Version == 2 {
						got = d
						break
					}
				}
			}
			if !got.Final || got.Verdict != tt.verdict || (got.RollbackVersion != 0) != tt.rollback || !strings.Contains(got.Reason, tt.reason) {
				t.Fatalf("after %s: %s final %v rollback v%d: %s\nwant %s rollback %v: %s", got.At.Sub(at), got.Verdict, got.Final,
					got.RollbackVersion, got.Reason, tt.verdict, tt.rollback, tt.reason)
			}
			if tt.rollback != (got.At.Sub(at) == 150*time.Second) {
				t.Fatalf("decided %s after activation", got.At.Sub(at))
			}
			silent := strings.Contains(got.Reason, "no instance reported after v2")
			if want := !strings.Contains(tt.name, "not silent"); silent != want {
				t.Fatalf("reason %q says no instance reported: %v, want %v", got.Reason, silent, want)
			}
			evs := rec.Events("")
			if len(evs) != 1 || evs[0].Kind != tt.event || silent && !strings.Contains(evs[0].Message, "no instance reported after v2") {
				t.Fatalf("events %+v, want one %s", evs, tt.event)
			}
		})
	}
}

func TestNewRefusesTolerancesThatNeverRollBack(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		want string
	}{
		{"error tolerance 1", Options{ErrorTolerance: 1}, "ErrorTolerance is 1, want in (0, 1)"},
		{"error tolerance 5", Options{ErrorTolerance: 5}, "ErrorTolerance is 5, want in (0, 1)"},
		{"goodput tolerance 1", Options{GoodputTolerance: 1}, "GoodputTolerance is 1, want in (0, 1)"},
		{"goodput tolerance 2", Options{GoodputTolerance: 2}, "GoodputTolerance is 2, want in (0, 1)"},
		{"step below 100ms", Options{Step: time.Millisecond, Window: time.Second, MinSamples: 2}, "Step is 1ms, want at least 100ms"},
		{"window below 1s", Options{Step: 100 * time.Millisecond, Window: 500 * time.Millisecond, MinSamples: 2}, "Window is 500ms, want at least 1s"},
		{"max wait shorter than window", Options{Window: 2 * time.Minute, MaxWait: time.Minute}, "MaxWait 1m0s is shorter than Window 2m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.Store, tt.o.Series = nopStore{}, fakeSeries{}
			_, err := New(tt.o)
			if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
	if _, err := New(Options{Store: nopStore{}, Series: fakeSeries{}, ErrorTolerance: 0.99, GoodputTolerance: 0.99, LatencyTolerance: 5}); err != nil {
		t.Fatal(err)
	}
}

// memStore is an in-memory rules store on clk, closed when the test ends.
func memStore(t testing.TB, clk clock.Clock) versioning.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Options{Path: ":memory:", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
