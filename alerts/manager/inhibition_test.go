package manager

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/inhibit"
	"governor.dev/governor/alerts/rule"
)

// In a storm (a P0 in some services, P1 and P2 of several instances in
// every one) each alert is shown inhibited by the source a scan of every
// firing alert finds (inhibit.Inhibitor.MutedBy), and the step counts
// those as inhibited.
func TestStormInhibitionMatchesScanOfFiringAlerts(t *testing.T) {
	h := newHarness(t)
	h.close()
	h.rules = []rule.Rule{
		{Name: "DependencyDown", Expr: "down", Severity: alerts.P0},
		{Name: "HighLoad", Expr: "load", Severity: alerts.P1},
		{Name: "Shedding", Expr: "shed", Severity: alerts.P2},
	}
	h.open()
	series := map[string][]rule.Sample{}
	for i := range 300 {
		svc, expr := i%40, []string{"load", "shed"}[i%2]
		if i < 40 && svc%3 == 0 {
			expr = "down"
		}
		series[expr] = append(series[expr], rule.Sample{Value: 1,
			Labels: map[string]string{"service": fmt.Sprintf("svc%02d", svc), "instance": fmt.Sprintf("i%d", i/40)}})
	}
	h.db.mu.Lock()
	h.db.series = series
	h.db.mu.Unlock()
	if err := h.m.Step(context.Background(), t0); err != nil {
		t.Fatal(err)
	}
	in, err := inhibit.New(inhibit.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	st := h.m.Alerts(t0)
	firing := make([]alerts.Alert, 0, len(st))
	for _, s := range st {
		firing = append(firing, s.Alert)
	}
	inhibited := 0
	for _, s := range st {
		want := ""
		if fp, ok := in.MutedBy(s.Labels, firing); ok {
			want = fp.String()
			inhibited++
		}
		if s.InhibitedBy != want {
			t.Fatalf("%s inhibited by %q, a scan of the firing alerts says %q", s.Labels, s.InhibitedBy, want)
		}
	}
	if inhibited == 0 || inhibited == len(st) {
		t.Fatalf("%d of %d alerts inhibited: the storm does not exercise both answers", inhibited, len(st))
	}
	if got := testutil.ToFloat64(h.m.m.muted.WithLabelValues("inhibited")); int(got) != inhibited {
		t.Fatalf("step counted %v inhibited, want %d", got, inhibited)
	}
	if !slices.ContainsFunc(st, func(s Status) bool { return s.InhibitedBy == "" && s.Labels["severity"] == "P1" }) {
		t.Fatal("no P1 of a service without P0 left unmuted")
	}
}
