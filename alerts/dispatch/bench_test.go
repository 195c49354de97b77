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
	benchmarkFlush(b, []Route{{Receiver: "pager", Severities: []alerts.Severity{alerts.P0}, Continue: true}, {Receiver: "team"}})
}

// BenchmarkFlushGroupByAll is BenchmarkFlush with group_by ["..."]: each
// of the 1000 alerts is a group of its own, its key made of all its label
// names.
func BenchmarkFlushGroupByAll(b *testing.B) {
	benchmarkFlush(b, []Route{{Receiver: "team", GroupBy: []string{GroupByAll}}})
}

func benchmarkFlush(b *testing.B, routes []Route) {
	d, err := New(routes, Timing{})
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

// BenchmarkFlushP2InAZone is a steady dispatch step over 1000 P2 groups
// held for business hours, in UTC and in a named zone.
func BenchmarkFlushP2InAZone(b *testing.B) {
	for _, loc := range []string{"", "Europe/Paris"} {
		b.Run("loc="+loc, func(b *testing.B) {
			bh := DefaultBusinessHours()
			bh.Location = loc
			d, err := New([]Route{{Receiver: "team"}}, Timing{BusinessHours: bh})
			if err != nil {
				b.Fatal(err)
			}
			as := make([]alerts.Alert, 0, 1000)
			for i := range 1000 {
				as = append(as, alerts.Alert{Labels: alerts.Labels{"alertname": fmt.Sprintf("R%d", i%10), "service": fmt.Sprintf("s%d", i/10),
					"instance": fmt.Sprintf("i%d", i), "severity": "P2"}, StartsAt: t0})
			}
			d.Flush(t0, as, Filter{})
			d.Flush(t0.Add(time.Minute), as, Filter{})
			now := t0.Add(2 * time.Minute)
			b.ReportAllocs()
			for b.Loop() {
				d.Flush(now, as, Filter{})
			}
		})
	}
}
