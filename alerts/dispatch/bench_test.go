package dispatch

import (
	"fmt"
	"testing"
	"time"

	"governor.dev/governor/alerts"
)

// BenchmarkFlush is one dispatch step over 1000 firing alerts in 100
// groups, steady state (nothing due): the cost paid at every evaluation.
func BenchmarkFlush(b *testing.B) {
	d, err := New([]Route{{Receiver: "pager", Severities: []alerts.Severity{alerts.P0}, Continue: true}, {Receiver: "team"}}, Timing{})
	if err != nil {
		b.Fatal(err)
	}
	as := make([]alerts.Alert, 0, 1000)
	for i := range 1000 {
		as = append(as, alerts.Alert{Labels: alerts.Labels{"alertname": fmt.Sprintf("R%d", i%10), "service": fmt.Sprintf("s%d", i%10),
			"instance": fmt.Sprintf("i%d", i), "severity": []string{"P0", "P1", "P2"}[i%3]}, StartsAt: t0})
	}
	d.Flush(t0, as, Filter{})
	d.Flush(t0.Add(time.Minute), as, Filter{})
	now := t0.Add(2 * time.Minute)
	b.ReportAllocs()
	for b.Loop() {
		d.Flush(now, as, Filter{})
	}
}

// BenchmarkRouteMatch is the per-alert routing test, run from many
// goroutines as the API's status listing does.
func BenchmarkRouteMatch(b *testing.B) {
	ms, err := alerts.ParseMatchers(`{service=~"check.*", alertname!="Noise"}`)
	if err != nil {
		b.Fatal(err)
	}
	r := Route{Receiver: "team", Matchers: ms, Severities: []alerts.Severity{alerts.P0, alerts.P1}}
	l := alerts.Labels{"alertname": "Shed", "service": "checkout", "severity": "P1", "instance": "i1"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !r.Matches(l) {
				b.Fatal("no match")
			}
		}
	})
}
