package guardrail

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
)

// TestSignalSeries runs the guardrail's queries on the embedded store: two
// services, two instances each, counters at steady rates. checkout is
// offered 100 requests/s, sheds 10% and fails 5% of what it admits; cart is
// offered twice as much and never fails, so a query that mixed the two
// would show.
func TestSignalSeries(t *testing.T) {
	ctx := context.Background()
	db, err := embedded.Open(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type rates struct{ admitted, shed, errors float64 } // per instance, per second
	services := map[string]rates{"checkout": {45, 5, 2.25}, "cart": {100, 0, 0}}
	for step := 0; step <= 20; step++ {
		at := t0.Add(time.Duration(step) * 15 * time.Second)
		secs := at.Sub(t0).Seconds()
		app := db.Appender(ctx)
		for svc, r := range services {
			for i := range 2 {
				base := []string{"job", "governor", "instance", fmt.Sprintf("%s-%d:8080", svc, i), "service", svc, "route", "api", "class", "core"}
				add := func(v float64, kv ...string) {
					if _, err := app.Append(0, labels.FromStrings(append(append([]string{}, base...), kv...)...), at.UnixMilli(), v); err != nil {
						t.Fatal(err)
					}
				}
				add(r.admitted*secs, "__name__", "governor_sdk_requests_total", "outcome", "admitted")
				add(r.shed*secs, "__name__", "governor_sdk_requests_total", "outcome", "shed")
				add(r.errors*secs, "__name__", "governor_sdk_request_errors_total")
			}
		}
		if err := app.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	reader, err := signals.NewReader(db, signals.ReaderOptions{MaxAge: -1})
	if err != nil {
		t.Fatal(err)
	}
	s := SignalSeries{Source: db, Reader: reader}
	tests := []struct {
		m    Metric
		want float64
	}{
		{OfferedLoad, 100},
		{ErrorRatio, 0.05},
		{AdmittedShare, 0.9},
		{GoodputShare, 0.9 * 0.95},
	}
	for _, tt := range tests {
		got, err := s.Samples(ctx, "checkout", tt.m, t0.Add(2*time.Minute), t0.Add(4*time.Minute), 30*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", tt.m, err)
		}
		if len(got) != 5 {
			t.Fatalf("%s: %d samples %v, want 5", tt.m, len(got), got)
		}
		for _, v := range got {
			if math.Abs(v-tt.want) > 1e-6*math.Max(1, tt.want) {
				t.Fatalf("%s: samples %v, want %v", tt.m, got, tt.want)
			}
		}
	}
	if _, err := s.Samples(ctx, "checkout", Metric("nonsense"), t0, t0.Add(time.Minute), time.Minute); err == nil {
		t.Fatal("an unknown metric was answered")
	}
	// One query for both services answers what one query each does.
	for _, m := range []Metric{OfferedLoad, ErrorRatio, LatencyP99, ShedRatio, AdmittedShare, GoodputShare} {
		from, to := t0.Add(2*time.Minute), t0.Add(4*time.Minute)
		got, ok, err := s.SamplesBy(ctx, []string{"checkout", "cart", "absent"}, m, from, to, 30*time.Second)
		if err != nil || !ok {
			t.Fatalf("%s: batch ok %v, %v", m, ok, err)
		}
		for _, svc := range []string{"checkout", "cart", "absent"} {
			alone, err := s.Samples(ctx, svc, m, from, to, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			var vals []float64
			for _, p := range got[svc] {
				vals = append(vals, p.V)
			}
			if fmt.Sprint(vals) != fmt.Sprint(alone) {
				t.Errorf("%s %s: batch %v, alone %v", m, svc, got[svc], alone)
			}
		}
		if len(got["cart"]) == 0 && m != LatencyP99 {
			t.Errorf("%s: no samples for cart", m)
		}
	}
	// The shares derived from the shed and error ratios are, to the bit,
	// what their queries answer.
	from, to := t0.Add(90*time.Second), t0.Add(5*time.Minute)
	shed, _, err := s.SamplesBy(ctx, []string{"checkout", "cart"}, ShedRatio, from, to, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	errs, _, err := s.SamplesBy(ctx, []string{"checkout", "cart"}, ErrorRatio, from, to, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, svc := range []string{"checkout", "cart"} {
		for m, derived := range map[Metric][]float64{GoodputShare: goodputShare(shed[svc], errs[svc]), AdmittedShare: admittedShare(shed[svc])} {
			want, err := s.Samples(ctx, svc, m, from, to, 15*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if len(want) == 0 || fmt.Sprint(derived) != fmt.Sprint(want) {
				t.Errorf("%s %s: derived %v, queried %v", svc, m, derived, want)
			}
			for i := range min(len(want), len(derived)) {
				if math.Float64bits(want[i]) != math.Float64bits(derived[i]) {
					t.Errorf("%s %s sample %d: derived %v, queried %v", svc, m, i, derived[i], want[i])
				}
			}
		}
	}
	if _, _, err := s.SamplesBy(ctx, []string{"checkout", "cart"}, Metric("nonsense"), t0, t0.Add(time.Minute), time.Minute); err == nil {
		t.Fatal("an unknown metric was answered in a batch")
	}
}

// TestSignalSeriesGoodputOfAServiceRefusingEverything: a service that
// sheds all of its 50 requests/s admits none, so its error ratio is 0/0;
// its goodput share is 0, not unknown, both queried and derived from the
// shed and error ratios as grid points do.
func TestSignalSeriesGoodputOfAServiceRefusingEverything(t *testing.T) {
	ctx := context.Background()
	db, err := embedded.Open(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for step := 0; step <= 20; step++ {
		at := t0.Add(time.Duration(step) * 15 * time.Second)
		app := db.Appender(ctx)
		base := []string{"job", "governor", "instance", "checkout-0:8080", "service", "checkout", "route", "api", "class", "core"}
		add := func(v float64, kv ...string) {
			if _, err := app.Append(0, labels.FromStrings(append(append([]string{}, base...), kv...)...), at.UnixMilli(), v); err != nil {
				t.Fatal(err)
			}
		}
		// Admitted and failed before, nothing admitted any more.
		add(1000, "__name__", "governor_sdk_requests_total", "outcome", "admitted")
		add(50*at.Sub(t0).Seconds(), "__name__", "governor_sdk_requests_total", "outcome", "shed")
		add(10, "__name__", "governor_sdk_request_errors_total")
		if err := app.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	reader, err := signals.NewReader(db, signals.ReaderOptions{MaxAge: -1})
	if err != nil {
		t.Fatal(err)
	}
	s := SignalSeries{Source: db, Reader: reader}
	from, to := t0.Add(2*time.Minute), t0.Add(4*time.Minute)
	for _, m := range []Metric{AdmittedShare, GoodputShare} {
		got, err := s.Samples(ctx, "checkout", m, from, to, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != "[0 0 0 0 0]" {
			t.Errorf("%s: %v, want five 0s", m, got)
		}
	}
	shed, _, err := s.SamplesBy(ctx, []string{"checkout"}, ShedRatio, from, to, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	errs, _, err := s.SamplesBy(ctx, []string{"checkout"}, ErrorRatio, from, to, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := goodputShare(shed["checkout"], errs["checkout"]); fmt.Sprint(got) != "[0 0 0 0 0]" {
		t.Errorf("goodput share derived from shed ratios %v and error ratios %v: %v, want five 0s", shed["checkout"], errs["checkout"], got)
	}
}
