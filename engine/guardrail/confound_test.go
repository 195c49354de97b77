package guardrail

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// withDownstream is ruleset(rate) calling payments through a breaker that
// opens at the given error ratio.
func withDownstream(rate, errorRatio float64) *rules.Ruleset {
	rs := ruleset(rate)
	rs.Downstreams = []rules.Downstream{{Name: "payments", Breaker: &rules.Breaker{ErrorRatio: errorRatio}}}
	return rs
}

// twoVersions makes v1 and v2 live with the given rulesets, v2 at the
// returned time.
func twoVersions(t *testing.T, clk *clock.Fake, v1, v2 *rules.Ruleset) (versioning.Store, time.Time) {
	t.Helper()
	ctx := context.Background()
	st := memStore(t, clk)
	for i, rs := range []*rules.Ruleset{v1, v2} {
		p, err := st.Propose(ctx, versioning.Proposal{BaseVersion: int64(i), Ruleset: rs, Author: alice, Reason: "test"})
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

// scaled returns healthy values with the offered load after the switch
// multiplied by load; change, if set, overrides a metric after the switch.
func scaled(load float64, change func(m Metric, i int) (float64, bool)) func(m Metric, after bool, i int) float64 {
	return func(m Metric, after bool, i int) float64 {
		if !after {
			return healthy(m, i)
		}
		if change != nil {
			if v, ok := change(m, i); ok {
				return v
			}
		}
		if m == OfferedLoad {
			return healthy(m, i) * load
		}
		return healthy(m, i)
	}
}

type confoundCase struct {
	name string
	// v2 is the guarded version's ruleset (default ruleset(10)); v1 its
	// parent's (default ruleset(100)).
	v1, v2 *rules.Ruleset
	value  func(m Metric, after bool, i int) float64
	timed  func(m Metric, t time.Time, i int) float64
	// incidents, if set, is noted every cycle (relative to activation).
	incidents func(since time.Duration) []Incident
	advance   time.Duration

	verdict    Verdict
	final      bool
	rollback   bool
	event      events.Kind
	confounder string // a substring of one of the decision's confounders
	check      Metric // the check that must carry checkVerdict
	checkVerd  Verdict
}

// runConfound plays a case on a 10 s cycle from activation until the
// decision is final or advance has passed, and checks the outcome.
func runConfound(t *testing.T, tt confoundCase) Decision {
	t.Helper()
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	v1, v2 := tt.v1, tt.v2
	if v1 == nil {
		v1 = ruleset(100)
	}
	if v2 == nil {
		v2 = ruleset(10)
	}
	st, at := twoVersions(t, clk, v1, v2)
	rec := events.NewRecorder(10)
	g, err := New(Options{Store: st, Series: fakeSeries{switchAt: at.Add(30 * time.Second), value: tt.value, timed: tt.timed},
		Window: 2 * time.Minute, Settle: 30 * time.Second, Step: 10 * time.Second, MinSamples: 6, LoadRatio: 1.5, Events: rec})
	if err != nil {
		t.Fatal(err)
	}
	var got Decision
	// Incidents are noted from well before activation, as a running
	// engine would have.
	for s := -3 * time.Minute; s <= 0; s += 10 * time.Second {
		if tt.incidents != nil {
			g.Note(at.Add(s), tt.incidents(s))
		}
	}
	for clk.Now().Sub(at) < tt.advance {
		clk.Advance(10 * time.Second)
		if tt.incidents != nil {
			g.Note(clk.Now(), tt.incidents(clk.Now().Sub(at)))
		}
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
		if got.RollbackVersion == 0 || act.Number != got.RollbackVersion || act.RollbackOf != 1 {
			t.Fatalf("active v%d rollback_of %d; decision %+v", act.Number, act.RollbackOf, got)
		}
	} else if act.Number != 2 {
		t.Fatalf("active is v%d, want v2 untouched (%s)", act.Number, got.Reason)
	}
	evs := rec.Events("")
	if tt.event == "" && len(evs) != 0 || tt.event != "" && (len(evs) != 1 || evs[0].Kind != tt.event) {
		t.Fatalf("events %+v, want %q", evs, tt.event)
	}
	if tt.confounder != "" {
		found := false
		for _, c := range got.Confounders {
			found = found || strings.Contains(c, tt.confounder)
		}
		if !found || !strings.Contains(got.Reason+strings.Join(checkDetails(got), " "), tt.confounder) {
			t.Fatalf("confounder %q not named: confounders %q, reason %q", tt.confounder, got.Confounders, got.Reason)
		}
	}
	if tt.check != "" {
		c, ok := checkOf(got, tt.check)
		if !ok || c.Verdict != tt.checkVerd {
			t.Fatalf("check %s: %+v, want verdict %s (checks %+v)", tt.check, c, tt.checkVerd, got.Checks)
		}
	}
	return got
}

func checkOf(d Decision, m Metric) (Check, bool) {
	for _, c := range d.Checks {
		if c.Metric == m {
			return c, true
		}
	}
	return Check{}, false
}

func checkDetails(d Decision) []string {
	var out []string
	for _, c := range d.Checks {
		out = append(out, c.Detail)
	}
	return out
}

func TestTrafficChanges(t *testing.T) {
	tests := []confoundCase{
		{
			// The absolute goodput falls to 30%: a comparison in requests/s
			// would roll this good version back.
			name: "traffic drop after a good version is not rolled back", value: scaled(0.3, nil), advance: 3 * time.Minute,
			verdict: Inconclusive, confounder: "offered load fell 3.3", check: GoodputShare, checkVerd: Inconclusive,
		},
		{
			name: "traffic drop stays inconclusive, never a pass, until the maximum wait", value: scaled(0.3, nil), advance: 8 * time.Minute,
			verdict: Inconclusive, final: true, event: events.GuardrailInconclusive, confounder: "offered load fell",
		},
		{
			name: "steady traffic and a real error regression rolls back",
			value: scaled(1, func(m Metric, i int) (float64, bool) {
				return 0.08 + float64(i%2)*0.01, m == ErrorRatio
			}),
			advance: 2 * time.Minute, verdict: Regression, final: true, rollback: true, event: events.AutoRollback,
			check: ErrorRatio, checkVerd: Regression,
		},
		{
			name: "traffic doubling and p99 up is inconclusive with the load named",
			value: scaled(2, func(m Metric, i int) (float64, bool) {
				return 0.3 + float64(i%3)*0.01, m == LatencyP99
			}),
			advance: 3 * time.Minute, verdict: Inconclusive, confounder: "offered load rose 2.00x", check: LatencyP99, checkVerd: Inconclusive,
		},
		{
			name: "traffic doubling and errors up is inconclusive",
			value: scaled(2, func(m Metric, i int) (float64, bool) {
				return 0.08 + float64(i%2)*0.01, m == ErrorRatio
			}),
			advance: 3 * time.Minute, verdict: Inconclusive, confounder: "offered load rose 2.00x", check: ErrorRatio, checkVerd: Inconclusive,
		},
		{
			// Half the doubled traffic is refused: as many requests served
			// as before, which the load rise explains.
			name: "traffic doubling and half of it shed is inconclusive",
			value: scaled(2, func(m Metric, i int) (float64, bool) {
				return healthy(GoodputShare, i) / 2, m == GoodputShare
			}),
			advance: 3 * time.Minute, verdict: Inconclusive, confounder: "offered load rose", check: GoodputShare, checkVerd: Inconclusive,
		},
		{
			// Fewer requests served than before despite twice the traffic:
			// the load cannot explain it.
			name: "traffic doubling and a goodput collapse rolls back",
			value: scaled(2, func(m Metric, i int) (float64, bool) {
				return 0.1 + float64(i%2)/100, m == GoodputShare
			}),
			advance: 3 * time.Minute, verdict: Regression, final: true, rollback: true, event: events.AutoRollback,
			confounder: "offered load rose", check: GoodputShare, checkVerd: Regression,
		},
		{
			// 1.3x the traffic, about the same number served: within the
			// load ratio and explained by it.
			name: "a load rise within the ratio that sheds the excess passes",
			value: scaled(1.3, func(m Metric, i int) (float64, bool) {
				return healthy(GoodputShare, i) / 1.3, m == GoodputShare
			}),
			advance: 3 * time.Minute, verdict: Pass, final: true, check: OfferedLoad, checkVerd: Pass,
		},
		{
			name: "traffic drop and p99 up rolls back: less load does not explain slower answers",
			value: scaled(0.3, func(m Metric, i int) (float64, bool) {
				return 0.5 + float64(i%3)*0.01, m == LatencyP99
			}),
			advance: 3 * time.Minute, verdict: Regression, final: true, rollback: true, event: events.AutoRollback,
			confounder: "offered load fell", check: LatencyP99, checkVerd: Regression,
		},
		{
			// The demo's bad version: a tenth of the rate and concurrency 2
			// refuse most of the traffic, which stays as it was.
			name: "a version that refuses most traffic rolls back",
			value: scaled(1, func(m Metric, i int) (float64, bool) {
				switch m {
				case GoodputShare, AdmittedShare:
					return 0.05 + float64(i%2)/100, true
				case LatencyP99:
					return 0.02, true
				}
				return 0, false
			}),
			advance: 2 * time.Minute, verdict: Regression, final: true, rollback: true, event: events.AutoRollback,
			check: GoodputShare, checkVerd: Regression,
		},
		{
			name: "no offered load after activation is inconclusive",
			value: scaled(1, func(m Metric, i int) (float64, bool) {
				return math.NaN(), m == OfferedLoad
			}),
			advance: 3 * time.Minute, verdict: Inconclusive, check: OfferedLoad, checkVerd: Inconclusive,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runConfound(t, tt) })
	}
}

func TestSlidingWindowJudgesOnceTheSpikeIsOver(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 20, 0, 0, time.UTC) // v2's activation in twoVersions
	// Twice the traffic for the first three minutes after activation,
	// then as before; every other signal healthy.
	spike := func(m Metric, at time.Time, i int) float64 {
		v := healthy(m, i)
		if m == OfferedLoad && !at.Before(base) && at.Before(base.Add(3*time.Minute)) {
			v *= 2
		}
		return v
	}
	d := runConfound(t, confoundCase{name: "spike", timed: spike, advance: 2*time.Minute + 40*time.Second,
		verdict: Inconclusive, confounder: "offered load rose"})
	if d.At.Sub(base) < 2*time.Minute+30*time.Second {
		t.Fatalf("judged at %s", d.At.Sub(base))
	}
	d = runConfound(t, confoundCase{name: "spike", timed: spike, advance: 7 * time.Minute, verdict: Pass, final: true})
	if len(d.Confounders) != 0 {
		t.Fatalf("confounders %q after the spike", d.Confounders)
	}
	// The first full window ended 2m30s after activation, inside the
	// spike; the pass comes from a later one.
	if !d.At.After(base.Add(3 * time.Minute)) {
		t.Fatalf("passed at %s, before the spike ended", d.At.Sub(base))
	}
	if c, _ := checkOf(d, OfferedLoad); c.Verdict != Pass || c.Effect > 1.5 {
		t.Fatalf("load check %+v", c)
	}
}

// breakerOpen notes the breaker to payments open from from on (relative to
// activation), until until (0: for good).
func breakerOpen(from, until time.Duration) func(time.Duration) []Incident {
	return func(since time.Duration) []Incident {
		if since < from || until != 0 && since >= until {
			return nil
		}
		return []Incident{{Service: "checkout", Kind: "breaker_open", Downstream: "payments",
			What: "the breaker to payments is open on 2 instance(s)"}}
	}
}

func TestIncidents(t *testing.T) {
	errorsUp := scaled(1, func(m Metric, i int) (float64, bool) {
		switch m {
		case ErrorRatio:
			return 0.3 + float64(i%2)*0.01, true
		case GoodputShare:
			return healthy(GoodputShare, i) * 0.7, true
		}
		return 0, false
	})
	tests := []confoundCase{
		{
			name: "errors up while a dependency's breaker is open is inconclusive with the incident named",
			v1:   withDownstream(100, 0.5), v2: withDownstream(10, 0.5), value: errorsUp, incidents: breakerOpen(40*time.Second, 0),
			advance: 3 * time.Minute, verdict: Inconclusive, confounder: "the breaker to payments is open on 2 instance(s) (after activation)",
			check: ErrorRatio, checkVerd: Inconclusive,
		},
		{
			name: "the incident replaces the goodput share by the admitted share",
			v1:   withDownstream(100, 0.5), v2: withDownstream(10, 0.5), value: errorsUp, incidents: breakerOpen(40*time.Second, 0),
			advance: 3 * time.Minute, verdict: Inconclusive, check: AdmittedShare, checkVerd: Pass,
		},
		{
			// The version changed the payments breaker: its opening may be
			// the version's doing.
			name: "a breaker the version reconfigured is no confounder",
			v1:   withDownstream(100, 0.5), v2: withDownstream(10, 0.05), value: errorsUp, incidents: breakerOpen(40*time.Second, 0),
			advance: 3 * time.Minute, verdict: Regression, final: true, rollback: true, event: events.AutoRollback,
			check: ErrorRatio, checkVerd: Regression,
		},
		{
			// More traffic sent to payments may be what broke it.
			name: "a version that admits more is not excused by a dependency's incident",
			v1:   withDownstream(100, 0.5), v2: withDownstream(200, 0.5), value: errorsUp, incidents: breakerOpen(40*time.Second, 0),
			advance: 3 * time.Minute, verdict: Regression, final: true, rollback: true, event: events.AutoRollback,
			check: ErrorRatio, checkVerd: Regression,
		},
		{
			name: "an incident without a downstream confounds a version that admits more",
			v1:   withDownstream(100, 0.5), v2: withDownstream(200, 0.5), value: errorsUp,
			incidents: func(since time.Duration) []Incident {
				return []Incident{{Service: "checkout", Kind: "anomaly", What: "the host is swapping"}}
			},
			advance: 3 * time.Minute, verdict: Inconclusive, confounder: "the host is swapping (across activation)", check: ErrorRatio, checkVerd: Inconclusive,
		},
		{
			name: "a version refusing most traffic during an incident still rolls back",
			v1:   withDownstream(100, 0.5), v2: withDownstream(10, 0.5), incidents: breakerOpen(40*time.Second, 0),
			value: scaled(1, func(m Metric, i int) (float64, bool) {
				return 0.05 + float64(i%2)/100, m == GoodputShare || m == AdmittedShare
			}),
			advance: 3 * time.Minute, verdict: Regression, final: true, rollback: true, event: events.AutoRollback,
			check: AdmittedShare, checkVerd: Regression,
		},
		{
			// An incident before activation made the before window worse;
			// it cannot explain a regression after.
			name: "an incident over before activation does not excuse a regression",
			v1:   withDownstream(100, 0.5), v2: withDownstream(10, 0.5), value: errorsUp, incidents: breakerOpen(-time.Minute, -30*time.Second),
			advance: 3 * time.Minute, verdict: Regression, final: true, rollback: true, event: events.AutoRollback,
			check: ErrorRatio, checkVerd: Regression,
		},
		{
			// It may also have hidden one: no pass.
			name: "an incident before activation keeps a healthy version from passing",
			v1:   withDownstream(100, 0.5), v2: withDownstream(10, 0.5), value: scaled(1, nil), incidents: breakerOpen(-time.Minute, -30*time.Second),
			advance: 3 * time.Minute, verdict: Inconclusive, confounder: "(before activation)", check: LatencyP99, checkVerd: Inconclusive,
		},
		{
			name: "an incident over before the windows does not count",
			v1:   withDownstream(100, 0.5), v2: withDownstream(10, 0.5), value: scaled(1, nil), incidents: breakerOpen(-3*time.Minute, -150*time.Second),
			advance: 3 * time.Minute, verdict: Pass, final: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runConfound(t, tt) })
	}
}

func TestNoteMergesAndForgets(t *testing.T) {
	g, err := New(Options{Store: nopStore{}, Series: fakeSeries{}, Window: time.Minute, Settle: 10 * time.Second, MaxWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	open := []Incident{{Service: "a", Kind: "breaker_open", Downstream: "x", What: "x open on 1"}}
	g.Note(t0, open)
	open[0].What = "x open on 2"
	g.Note(t0.Add(10*time.Second), open)
	g.Note(t0.Add(20*time.Second), nil)
	g.Note(t0.Add(30*time.Second), open)
	spans := g.incidentsIn("a", t0, t0.Add(time.Hour))
	if len(spans) != 2 || !spans[0].To.Equal(t0.Add(10*time.Second)) || spans[0].What != "x open on 2" || !spans[1].From.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("spans %+v", spans)
	}
	if got := g.incidentsIn("a", t0.Add(15*time.Second), t0.Add(25*time.Second)); len(got) != 0 {
		t.Fatalf("spans in the gap: %+v", got)
	}
	g.Note(t0.Add(10*time.Minute), nil) // beyond Window+Settle+MaxWait
	if got := g.incidentsIn("a", t0, t0.Add(time.Hour)); len(got) != 0 {
		t.Fatalf("kept %+v", got)
	}
}

func TestCheckJSONWithoutPValue(t *testing.T) {
	d := Decision{Checks: []Check{{Metric: ErrorRatio, PValue: math.NaN(), Effect: math.Inf(1), Verdict: Inconclusive},
		{Metric: LatencyP99, PValue: 0.01, Effect: 0.5, Verdict: Regression}}}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Checks []map[string]any `json:"checks"`
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Checks[0]["p_value"] != nil || back.Checks[0]["effect"] != nil || back.Checks[0]["metric"] != "error_ratio" ||
		back.Checks[1]["p_value"] != 0.01 || back.Checks[1]["verdict"] != "regression" {
		t.Fatalf("json %s", b)
	}
}

// nopStore is a versioning.Store no test path calls.
type nopStore struct{ versioning.Store }

func TestAdmitsMore(t *testing.T) {
	conc := func(rate float64, max int) *rules.Ruleset {
		rs := ruleset(rate)
		rs.Routes[0].Concurrency = &rules.Concurrency{Max: max}
		return rs
	}
	noLimit := ruleset(1)
	noLimit.Routes[0].RateLimit = nil
	tests := []struct {
		name      string
		v, parent *rules.Ruleset
		want      bool
	}{
		{"lower rate", ruleset(10), ruleset(100), false},
		{"same", ruleset(100), ruleset(100), false},
		{"higher rate", ruleset(200), ruleset(100), true},
		{"rate limit removed", noLimit, ruleset(100), true},
		{"rate limit added", ruleset(100), noLimit, false},
		{"higher concurrency", conc(100, 50), conc(100, 20), true},
		{"concurrency to the default maximum", conc(100, 0), conc(100, 20), true},
		{"lower concurrency", conc(100, 10), conc(100, 20), false},
		{"no parent", ruleset(200), nil, false},
	}
	for _, tt := range tests {
		if got := admitsMore(tt.v, tt.parent); got != tt.want {
			t.Errorf("%s: admitsMore = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestSpikeAcrossActivation is the demo's spike seen by a version activated
// just after it began: it covers the end of the window before and most of
// the one after. The means differ by less than the load ratio; the medians
// tell the windows apart, so the p99 rise is not blamed on the version.
func TestSpikeAcrossActivation(t *testing.T) {
	act := time.Date(2026, 1, 1, 0, 20, 0, 0, time.UTC) // v2's activation in twoVersions
	inSpike := func(at time.Time) bool {
		return !at.Before(act.Add(-30*time.Second)) && at.Before(act.Add(120*time.Second))
	}
	spike := func(m Metric, at time.Time, i int) float64 {
		v := healthy(m, i)
		if !inSpike(at) {
			return v
		}
		switch m {
		case OfferedLoad:
			return v * 2.5
		case LatencyP99:
			return 1 + float64(i%3)*0.01
		case GoodputShare, AdmittedShare:
			return 0.6 + float64(i%3)*0.01
		}
		return v
	}
	d := runConfound(t, confoundCase{timed: spike, advance: 2*time.Minute + 40*time.Second,
		verdict: Inconclusive, confounder: "offered load rose 2.4", check: LatencyP99, checkVerd: Inconclusive})
	if c, _ := checkOf(d, LatencyP99); !strings.Contains(c.Detail, "not held against the version: offered load rose") {
		t.Fatalf("p99 check %+v, want a regression not held against the version", c)
	}
	if c, _ := checkOf(d, OfferedLoad); !(c.Effect > 1 && c.Effect < 1.5) || !strings.Contains(c.Detail, "medians") {
		t.Fatalf("the means moved %vx; the case needs them within the load ratio", c.Effect)
	}
	if c, _ := checkOf(d, GoodputShare); c.Verdict != Inconclusive || !strings.Contains(c.Detail, "load rise explains") {
		t.Fatalf("goodput check %+v", c)
	}
	// Once the spike is over the latest window is comparable and healthy.
	runConfound(t, confoundCase{timed: spike, advance: 7 * time.Minute, verdict: Pass, final: true})
}

func TestMedian(t *testing.T) {
	tests := []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{math.NaN(), 5, math.Inf(1)}, 5},
	}
	for _, tt := range tests {
		if got := median(tt.xs); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.xs, got, tt.want)
		}
	}
	if got := median([]float64{math.NaN()}); !math.IsNaN(got) {
		t.Errorf("median of nothing finite = %v", got)
	}
}

// TestNewLeaderRebuilds: a guard that takes over mid-watch (a new leader)
// rebuilds the watch from the activation time and reaches the verdict the
// first one would have, naming the same confounder; a regression is rolled
// back once, and the new leader does not roll back the rollback.
func TestNewLeaderRebuilds(t *testing.T) {
	tests := []struct {
		name     string
		value    func(m Metric, after bool, i int) float64
		verdict  Verdict
		rollback bool
	}{
		{"traffic drop", scaled(0.3, nil), Inconclusive, false},
		{"error regression", scaled(1, func(m Metric, i int) (float64, bool) { return 0.2, m == ErrorRatio }), Regression, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			st, at := twoVersions(t, clk, ruleset(100), ruleset(10))
			newGuard := func() *Guard {
				g, err := New(Options{Store: st, Series: fakeSeries{switchAt: at.Add(30 * time.Second), value: tt.value},
					Window: 2 * time.Minute, Settle: 30 * time.Second, Step: 10 * time.Second, MinSamples: 6})
				if err != nil {
					t.Fatal(err)
				}
				return g
			}
			observe := func(g *Guard) []Decision {
				act, err := st.Active(ctx, "checkout")
				if err != nil {
					t.Fatal(err)
				}
				final, err := g.Observe(ctx, clk.Now(), []versioning.Version{act})
				if err != nil {
					t.Fatal(err)
				}
				return final
			}
			first := newGuard()
			clk.Advance(40 * time.Second) // settling: nothing decided
			if final := observe(first); len(final) != 0 || !first.Watching("checkout") {
				t.Fatalf("first leader decided %+v while settling", final)
			}
			// The first leader is gone; the second starts from nothing.
			second := newGuard()
			var got []Decision
			for range 20 {
				clk.Advance(10 * time.Second)
				if got = observe(second); len(got) > 0 {
					break
				}
			}
			if !tt.rollback {
				ds := second.Decisions()
				if len(ds) != 1 || ds[0].Verdict != tt.verdict || len(ds[0].Confounders) != 1 || !strings.Contains(ds[0].Confounders[0], "offered load fell") {
					t.Fatalf("decisions %+v", ds)
				}
				return
			}
			if len(got) != 1 || got[0].Verdict != tt.verdict || got[0].RollbackVersion == 0 {
				t.Fatalf("final %+v", got)
			}
			// A third leader sees the rollback version: watched, never
			// rolled back, whatever the signals say.
			third := newGuard()
			for range 30 {
				clk.Advance(10 * time.Second)
				for _, d := range observe(third) {
					if d.RollbackVersion != 0 {
						t.Fatalf("the rollback was rolled back: %+v", d)
					}
				}
			}
			if act, _ := st.Active(ctx, "checkout"); act.Number != got[0].RollbackVersion {
				t.Fatalf("active v%d, want the rollback v%d", act.Number, got[0].RollbackVersion)
			}
		})
	}
}
