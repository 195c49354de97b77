package evaluate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	alerts "governor.dev/governor/alerts/manager"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/alerts/store"
	"governor.dev/governor/engine/events"
	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/recommend"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
	"governor.dev/governor/engine/thresholds"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
)

// entry is a service's readings: p99 seconds, error ratio, request rate
// (NaN: unknown).
func entry(svc string, p99, errRatio, rate float64) map[signals.Key]*signals.Entry {
	v := func(f float64) signals.Value {
		if f != f {
			return signals.Unknown(signals.Missing, "no series")
		}
		return signals.KnownValue(f)
	}
	k := signals.Key{Service: svc}
	return map[signals.Key]*signals.Entry{k: {Key: k, Values: map[signals.Signal]signals.Value{
		signals.LatencyP99: v(p99), signals.ErrorRatio: v(errRatio), signals.RequestRate: v(rate)}}}
}

func noLearned(string) (thresholds.Recommendation, bool) { return thresholds.Recommendation{}, false }

// TestAlertLevelsEvents: a reading above a level is reported when it
// crosses and every Refresh while it stays; back at or below, once
// cleared; each level on its own.
func TestAlertLevelsEvents(t *testing.T) {
	ctx := context.Background()
	l := DefaultAlertLevels()
	l.LatencyWarn, l.LatencyCritical = 200*time.Millisecond, 500*time.Millisecond
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	rec := events.NewRecorder(100)
	t0 := benchT0
	steps := []struct {
		after         time.Duration
		p99, er, rate float64
		want          []string
	}{
		{0, 0.1, 0.001, 100, nil},
		{10 * time.Second, 0.3, 0.001, 100, []string{"level_crossed latency_p99 warn warning"}},
		{20 * time.Second, 0.3, 0.001, 100, nil}, // within Refresh
		{70 * time.Second, 0.6, 0.001, 100, []string{"level_crossed latency_p99 warn warning", // refreshed
			"level_crossed latency_p99 critical critical"}},
		{80 * time.Second, 0.4, 0.02, 100, []string{"level_cleared latency_p99 critical info",
			"level_crossed error_ratio warn warning"}},
		{90 * time.Second, 0.4, 0.5, 0.5, nil},                                                        // too few requests to judge the error ratio
		{100 * time.Second, nan(), 0.5, 100, []string{"level_crossed error_ratio critical critical"}}, // unknown p99: nothing
		{110 * time.Second, 0.1, 0.001, 100, []string{"level_cleared latency_p99 warn info",
			"level_cleared error_ratio warn info", "level_cleared error_ratio critical info"}},
		{120 * time.Second, 0.1, 0.001, 100, nil},
	}
	seen := 0
	for i, s := range steps {
		l.check(ctx, t0.Add(s.after), entry("checkout", s.p99, s.er, s.rate), noLearned, rec)
		var got []string
		for _, e := range rec.Events("")[seen:] {
			d := e.Detail.(events.Level)
			if e.Service != "checkout" || !e.At.Equal(t0.Add(s.after)) || d.Source != "configured" || !strings.Contains(e.Message, d.Level) {
				t.Fatalf("step %d: event %+v", i, e)
			}
			got = append(got, fmt.Sprintf("%s %s %s %s", e.Kind, d.Signal, d.Level, e.Severity))
		}
		seen = len(rec.Events(""))
		if !sameSet(got, s.want) {
			t.Fatalf("step %d: events %q, want %q", i, got, s.want)
		}
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, s := range a {
		m[s]++
	}
	for _, s := range b {
		m[s]--
	}
	for _, n := range m {
		if n != 0 {
			return false
		}
	}
	return true
}

func nan() float64 { var z float64; return z / z }

// TestAlertLevelsLearned: without fixed p99 levels, the levels are the
// ones the service's healthy baseline recommends, and none while it is
// inconclusive.
func TestAlertLevelsLearned(t *testing.T) {
	ctx := context.Background()
	ro := recommend.DefaultOptions()
	ro.Thresholds.MinSamples = 20
	r, err := recommend.New(ro)
	if err != nil {
		t.Fatal(err)
	}
	l := DefaultAlertLevels()
	rec := events.NewRecorder(100)
	t0 := benchT0
	feed := func(svc string, i int, p99 float64) {
		at := t0.Add(time.Duration(i) * 10 * time.Second)
		en := entry(svc, p99, 0, 100)[signals.Key{Service: svc}]
		en.Values[signals.LatencyP50] = signals.KnownValue(p99 / 3)
		r.Evaluate(recommend.Input{At: at, Service: svc, Entry: en, Score: loadscore.Score{}})
		l.check(ctx, at, map[signals.Key]*signals.Entry{en.Key: en}, r.Thresholds, rec)
	}
	for i := range 10 {
		feed("cold", i, 5) // far above anything, but nothing to compare with yet
	}
	if got := rec.Events(""); len(got) != 0 {
		t.Fatalf("inconclusive baseline, events %+v", got)
	}
	i := 0
	for ; i < 100; i++ {
		feed("api", i, 0.1+0.002*float64(i%5)) // steady: a tiny spread
	}
	th, ok := r.Thresholds("api")
	if !ok || th.Inconclusive || !(th.LatencyWarn > 0.1 && th.LatencyCritical > th.LatencyWarn) {
		t.Fatalf("learned %+v %v", th, ok)
	}
	if got := rec.Events(""); len(got) != 0 {
		t.Fatalf("healthy readings, events %+v", got)
	}
	if !(th.LatencyWarn < th.BaselineP99*1.2) {
		t.Fatalf("learned levels %+v: want a steady service's warn level within 20%% of its baseline", th)
	}
	feed("api", i, th.BaselineP99*1.2) // above the learned levels, inside the margin
	if got := rec.Events(""); len(got) != 0 {
		t.Fatalf("inside the margin, events %+v", got)
	}
	i++
	feed("api", i, th.BaselineP99*1.6)
	got := rec.Events(events.LevelCrossed)
	if len(got) != 2 {
		t.Fatalf("events %+v, want warn and critical crossed", got)
	}
	for _, e := range got {
		if d := e.Detail.(events.Level); d.Source != "learned" || d.Signal != events.SignalLatencyP99 || e.Service != "api" {
			t.Fatalf("event %+v", e)
		}
	}
	if _, ok := r.Thresholds("unknown"); ok {
		t.Fatal("thresholds of a service never evaluated")
	}
}

// TestAlertLevelsAlerting: level events through the alerts manager's
// built-in rules, on one injected clock: a p99 above the critical level
// pends for the rule's 5 minutes, then fires as P1 (critical) and P2
// (warn); back below critical the P1 resolves and the P2 stays; below warn
// everything resolves.
func TestAlertLevelsAlerting(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, ":memory:", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	clk := clock.NewFake(benchT0)
	var eventRules []rule.Rule
	for _, r := range rule.Builtin() {
		if r.Event != "" {
			eventRules = append(eventRules, r)
		}
	}
	m, err := alerts.New(ctx, alerts.Options{Rules: eventRules, Store: st, Clock: clk,
		Receivers: map[string]notify.Notifier{"discard": discard{}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	sink := alerts.EngineSink{M: m}
	l := DefaultAlertLevels()
	l.LatencyWarn, l.LatencyCritical = 200*time.Millisecond, 500*time.Millisecond
	firing := func() map[string]string {
		out := map[string]string{}
		for _, s := range m.Alerts(clk.Now()) {
			if s.EndsAt.IsZero() && s.Labels["alertname"] == "GovernorSignalAboveLevel" {
				out[s.Labels["service"]+" "+s.Labels["signal"]+" "+s.Labels["level"]] = s.Labels["severity"]
			}
		}
		return out
	}
	// One engine cycle and one alerts step every 10 s.
	run := func(d time.Duration, p99 float64) {
		t.Helper()
		for end := clk.Now().Add(d); clk.Now().Before(end); {
			clk.Advance(10 * time.Second)
			l.check(ctx, clk.Now(), entry("checkout", p99, 0, 100), noLearned, sink)
			if err := m.Step(ctx, clk.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := func(step string, w map[string]string) {
		t.Helper()
		got := firing()
		if fmt.Sprint(got) != fmt.Sprint(w) {
			t.Fatalf("%s: firing %v, want %v", step, got, w)
		}
	}
	run(time.Minute, 0.1)
	want("healthy", map[string]string{})
	run(4*time.Minute, 0.8)
	want("above critical for 4m: pending", map[string]string{})
	run(time.Minute+10*time.Second, 0.8)
	want("above critical for 5m", map[string]string{"checkout latency_p99 critical": "P1", "checkout latency_p99 warn": "P2"})
	run(20*time.Second, 0.3)
	want("below critical", map[string]string{"checkout latency_p99 warn": "P2"})
	run(20*time.Second, 0.1)
	want("below warn", map[string]string{})
	// A short excursion does not page.
	run(2*time.Minute, 0.8)
	run(time.Minute, 0.1)
	run(5*time.Minute, 0.1)
	want("short excursion", map[string]string{})
}

type discard struct{}

func (discard) Notify(context.Context, *notify.Message) (bool, error) { return false, nil }

// BenchmarkAlertLevels is the alert-level part of one cycle for 1,000
// services with learned (conclusive) p99 levels.
func BenchmarkAlertLevels(b *testing.B) {
	const services = 1000
	ctx := context.Background()
	ro := recommend.DefaultOptions()
	ro.Thresholds.MinSamples = 5
	r, err := recommend.New(ro)
	if err != nil {
		b.Fatal(err)
	}
	entries := map[signals.Key]*signals.Entry{}
	for s := range services {
		svc := fmt.Sprintf("svc-%04d", s)
		for i := range 10 {
			en := entry(svc, 0.1+0.001*float64(i%3), 0.001, 100)[signals.Key{Service: svc}]
			en.Values[signals.LatencyP50] = signals.KnownValue(0.03)
			r.Evaluate(recommend.Input{At: benchT0.Add(time.Duration(i) * 10 * time.Second), Service: svc, Entry: en})
			entries[en.Key] = en
		}
	}
	l := DefaultAlertLevels()
	at := benchT0.Add(time.Hour)
	b.ReportAllocs()
	for b.Loop() {
		at = at.Add(10 * time.Second)
		l.check(ctx, at, entries, r.Thresholds, events.Discard{})
	}
}

// TestTickAlertLevels: a cycle compares every service's p99 latency, as
// read from the metrics store, with the levels and reports those above.
func TestTickAlertLevels(t *testing.T) {
	ctx := context.Background()
	db, err := embedded.Open(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fillStore(t, db, 10, 1)
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reader, err := signals.NewReader(db, signals.ReaderOptions{MaxAge: -1})
	if err != nil {
		t.Fatal(err)
	}
	at := benchT0.Add(5 * time.Minute)
	snap, err := reader.Read(ctx, at, signals.PerService)
	if err != nil {
		t.Fatal(err)
	}
	p99 := map[string]float64{}
	var all []float64
	for k, en := range snap.Entries {
		if v, ok := en.Get(signals.LatencyP99).Get(); ok {
			p99[k.Service] = v
			all = append(all, v)
		}
	}
	slices.Sort(all)
	if len(all) != 10 || all[0] == all[9] {
		t.Fatalf("p99 by service %v: want ten different values", p99)
	}
	l := DefaultAlertLevels()
	l.LatencyWarn = time.Duration((all[4] + all[5]) / 2 * float64(time.Second))
	l.LatencyCritical = time.Duration(all[9] * 2 * float64(time.Second))
	rec := events.NewRecorder(100)
	e := newEmergencyEval(t, reader, st, nil, nil, rec)
	e.o.Levels = l
	if _, err := e.Tick(ctx, at); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, ev := range rec.Events(events.LevelCrossed) {
		d := ev.Detail.(events.Level)
		if d.Signal != events.SignalLatencyP99 || d.Level != events.LevelWarn || ev.Severity != events.Warning {
			t.Fatalf("event %+v", ev)
		}
		got[ev.Service] = d.Value
	}
	want := map[string]float64{}
	for svc, v := range p99 {
		if v > l.LatencyWarn.Seconds() {
			want[svc] = v
		}
	}
	if len(want) != 5 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("crossed %v, want %v", got, want)
	}
}

// TestAlertLevelsOverrides: a service's own levels replace the defaults,
// and a disabled service is not compared.
func TestAlertLevelsOverrides(t *testing.T) {
	l := DefaultAlertLevels()
	l.LatencyWarn, l.LatencyCritical = 200*time.Millisecond, 500*time.Millisecond
	l.Services = map[string]LevelOverride{
		"batch":  {LatencyWarn: time.Second, LatencyCritical: 2 * time.Second, ErrorWarn: 0.1, ErrorCritical: 0.2},
		"legacy": {Disabled: true},
		"search": {ErrorWarn: 0.001, ErrorCritical: 0.01},
	}
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	rec := events.NewRecorder(100)
	entries := map[signals.Key]*signals.Entry{}
	for _, svc := range []string{"batch", "legacy", "search", "checkout"} {
		maps.Copy(entries, entry(svc, 0.6, 0.06, 100))
	}
	l.check(context.Background(), benchT0, entries, noLearned, rec)
	var got []string
	for _, e := range rec.Events(events.LevelCrossed) {
		d := e.Detail.(events.Level)
		got = append(got, fmt.Sprintf("%s %s %s %g", e.Service, d.Signal, d.Level, d.Threshold))
	}
	want := []string{
		"checkout latency_p99 warn 0.2", "checkout latency_p99 critical 0.5", "checkout error_ratio warn 0.01", "checkout error_ratio critical 0.05",
		"search latency_p99 warn 0.2", "search latency_p99 critical 0.5", "search error_ratio warn 0.001", "search error_ratio critical 0.01",
	}
	if !sameSet(got, want) {
		t.Fatalf("crossed %q, want %q", got, want)
	}
	for name, o := range map[string]LevelOverride{
		"half latency": {LatencyWarn: time.Second},
		"error order":  {ErrorWarn: 0.2, ErrorCritical: 0.1},
	} {
		l.Services = map[string]LevelOverride{"x": o}
		if err := l.Validate(); err == nil || !strings.Contains(err.Error(), `Services["x"]`) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestErrorLevelsPrecedence: a service's own error-ratio levels are
// authoritative; otherwise learned levels over the configured floors (the
// floors while the baseline is inconclusive, none without floors), or the
// configured levels when learning is off.
func TestErrorLevelsPrecedence(t *testing.T) {
	learned := func(warn, crit, base float64, inconclusive bool) func(string) (thresholds.Recommendation, bool) {
		return func(string) (thresholds.Recommendation, bool) {
			return thresholds.Recommendation{Inconclusive: inconclusive, BaselineErrorRatio: base, ErrorWarn: warn, ErrorCritical: crit}, true
		}
	}
	floors := func(w, c float64, learn bool) *AlertLevels {
		l := DefaultAlertLevels()
		l.ErrorWarn, l.ErrorCritical, l.ErrorLearned = w, c, learn
		l.Services = map[string]LevelOverride{"slo": {ErrorWarn: 0.001, ErrorCritical: 0.002}, "off": {Disabled: true}}
		return l
	}
	tests := []struct {
		name       string
		l          *AlertLevels
		svc        string
		learned    func(string) (thresholds.Recommendation, bool)
		warn, crit float64
		source     string
		ok         bool
	}{
		{"override wins over learned", floors(0.01, 0.05, true), "slo", learned(0.03, 0.06, 0.02, false), 0.001, 0.002, "configured", true},
		{"disabled", floors(0.01, 0.05, true), "off", learned(0.03, 0.06, 0.02, false), 0, 0, "", false},
		{"learned above the floors", floors(0.01, 0.05, true), "api", learned(0.03, 0.06, 0.02, false), 0.03, 0.06, "learned", true},
		{"learned below the floors: the floors", floors(0.01, 0.05, true), "api", learned(0.002, 0.004, 0.001, false), 0.01, 0.05, "configured", true},
		{"learned warn above, critical below", floors(0.01, 0.05, true), "api", learned(0.02, 0.03, 0.01, false), 0.02, 0.05, "learned", true},
		{"margin above the baseline", floors(0, 0, true), "api", learned(0.0101, 0.0102, 0.01, false), 0.0125, 0.015, "learned", true},
		{"inconclusive: the floors", floors(0.01, 0.05, true), "api", learned(0, 0, 0, true), 0.01, 0.05, "configured", true},
		{"inconclusive without floors: none", floors(0, 0, true), "api", learned(0, 0, 0, true), 0, 0, "configured", false},
		{"never evaluated without floors: none", floors(0, 0, true), "api", noLearned, 0, 0, "configured", false},
		{"configured only", floors(0.01, 0.05, false), "api", learned(0.03, 0.06, 0.02, false), 0.01, 0.05, "configured", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.l.Validate(); err != nil {
				t.Fatal(err)
			}
			w, c, src, ok := tt.l.ErrorLevels(tt.svc, tt.learned)
			if ok != tt.ok || src != tt.source || math.Abs(w-tt.warn) > 1e-12 || math.Abs(c-tt.crit) > 1e-12 {
				t.Fatalf("got %v %v %q %v, want %v %v %q %v", w, c, src, ok, tt.warn, tt.crit, tt.source, tt.ok)
			}
		})
	}
	bad := floors(0, 0, false)
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "ErrorWarn 0 and ErrorCritical 0") {
		t.Fatalf("configured levels of zero: err %v", err)
	}
	half := floors(0.01, 0, true)
	if err := half.Validate(); err == nil || !strings.Contains(err.Error(), "floors of the learned levels") {
		t.Fatalf("half a floor: err %v", err)
	}
}

// TestLearnedErrorLevelsAlert: a service whose healthy error ratio is
// steady about 0.5% learns its own error-ratio levels (no floors) and
// alerts at 3%, which a floor of 5% would not.
func TestLearnedErrorLevelsAlert(t *testing.T) {
	ctx := context.Background()
	ro := recommend.DefaultOptions()
	ro.Thresholds.MinSamples = 50
	r, err := recommend.New(ro)
	if err != nil {
		t.Fatal(err)
	}
	l := DefaultAlertLevels()
	l.ErrorWarn, l.ErrorCritical = 0, 0
	rec := events.NewRecorder(100)
	feed := func(i int, er float64) {
		at := benchT0.Add(time.Duration(i) * 10 * time.Second)
		en := entry("api", 0.1+0.001*float64(i%3), er, 100)[signals.Key{Service: "api"}]
		en.Values[signals.LatencyP50] = signals.KnownValue(0.03)
		r.Evaluate(recommend.Input{At: at, Service: "api", Entry: en})
		l.check(ctx, at, map[signals.Key]*signals.Entry{en.Key: en}, r.Thresholds, rec)
	}
	for i := range 100 {
		feed(i, 0.004+0.0005*float64(i%5))
	}
	if got := rec.Events(""); len(got) != 0 {
		t.Fatalf("healthy readings: %+v", got)
	}
	feed(100, 0.03)
	got := rec.Events(events.LevelCrossed)
	if len(got) != 2 {
		t.Fatalf("crossed %+v, want the learned warn and critical error-ratio levels", got)
	}
	for _, e := range got {
		if d := e.Detail.(events.Level); d.Signal != events.SignalErrorRatio || d.Source != "learned" || !(d.Threshold > 0.005 && d.Threshold < 0.03) {
			t.Fatalf("event %+v", e)
		}
	}
}

// servicesDown is a rules store that cannot list its services.
type servicesDown struct{ versioning.Reader }

func (servicesDown) Services(context.Context) ([]versioning.ServiceInfo, error) {
	return nil, errors.New("connection refused")
}

// TestRulesStoreDownStillAlertsOnLevels: with the rules store down nothing
// can be judged or proposed, but the readings still alert (a level alert
// not refreshed would resolve while the reading stays above) and the
// cycle's scores are shown.
func TestRulesStoreDownStillAlertsOnLevels(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs := events.NewRecorder(100)
	e := newEmergencyEval(t, readerOf(t, 3), servicesDown{st}, nil, nil, evs)
	l := DefaultAlertLevels()
	l.LatencyWarn, l.LatencyCritical = time.Microsecond, time.Hour
	e.o.Levels = l
	at := benchT0.Add(5 * time.Minute)
	res, err := e.Tick(ctx, at)
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("error %v, want the store's", err)
	}
	if got := len(evs.Events(events.LevelCrossed)); got != 3 {
		t.Fatalf("%d level_crossed events with the rules store down, want 3", got)
	}
	if len(res.Scores) != 3 || len(e.Scores()) != 3 || !e.LastTick().Equal(at) {
		t.Fatalf("cycle scores %d, shown %d, last tick %s", len(res.Scores), len(e.Scores()), e.LastTick())
	}
}

func TestNewRefusesAlertLevelsNeverCrossed(t *testing.T) {
	tests := []struct {
		name string
		set  func(l *AlertLevels)
		want string
	}{
		{"configured critical 1", func(l *AlertLevels) { l.ErrorLearned, l.ErrorWarn, l.ErrorCritical = false, 0.5, 1 }, "AlertLevels.ErrorCritical 1: want above ErrorWarn (0.5) and below 1"},
		{"floor critical 1", func(l *AlertLevels) { l.ErrorWarn, l.ErrorCritical = 0.5, 1 }, "AlertLevels.ErrorCritical 1: want above ErrorWarn (0.5) and below 1"},
		{"override critical 1", func(l *AlertLevels) {
			l.Services = map[string]LevelOverride{"api": {ErrorWarn: 0.5, ErrorCritical: 1}}
		}, `AlertLevels.Services["api"].ErrorCritical 1: want above ErrorWarn (0.5) and below 1`},
		{"refresh past the resolve", func(l *AlertLevels) { l.Refresh = 5 * time.Minute }, "AlertLevels.Refresh 5m0s: want between 1s and 2m"},
		{"refresh below a second", func(l *AlertLevels) { l.Refresh = time.Millisecond }, "AlertLevels.Refresh 1ms: want between 1s and 2m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := DefaultAlertLevels()
			tt.set(l)
			_, err := New(Options{Levels: l})
			if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}
