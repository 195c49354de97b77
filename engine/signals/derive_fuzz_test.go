package signals

import (
	"math"
	"testing"
)

// FuzzDerive feeds arbitrary shared-query rows (labels, le bounds, values)
// to the derivation: it must never panic, every ratio must classify as
// unknown or within [0, 1], every sample must carry its scope's service, and
// the latency quantiles must not cross.
func FuzzDerive(f *testing.F) {
	f.Add("a", "i", "batch", "shed", 1.0, 4.0, "0.1", 3.0, 5.0, 2.0, false)
	f.Add("a", "i", "", "admitted", 0.0, 0.0, "+Inf", 0.0, 0.0, 0.0, true)
	f.Add("", "", "c", "queue_timeout", math.NaN(), math.Inf(1), "soon", -1.0, 1e300, math.NaN(), false)
	f.Add("b", "j", "core", "rate_limited", 2.0, 2.0, "NaN", 1.0, 1.0, 0.0, true)
	f.Fuzz(func(t *testing.T, svc, inst, class, outcome string, v1, v2 float64, le string, b1, b2, errs float64, perInstance bool) {
		scope := PerService
		if perInstance {
			scope = PerInstance
		}
		l := func(kv ...string) Labels {
			m := Labels{"service": svc, "instance": inst}
			for i := 0; i < len(kv); i += 2 {
				m[kv[i]] = kv[i+1]
			}
			return m
		}
		vec := func(s ...Sample) sharedAnswer { return sharedAnswer{res: &Result{Type: TypeVector, Samples: s}} }
		var got [numShared]sharedAnswer
		got[sharedRequests] = vec(
			Sample{Labels: l("class", class, "outcome", outcome), Point: Point{V: v1}},
			Sample{Labels: l("class", class, "outcome", "admitted"), Point: Point{V: v2}},
		)
		got[sharedErrors] = vec(Sample{Labels: l(), Point: Point{V: errs}})
		got[sharedLatency] = vec(
			Sample{Labels: l("le", le), Point: Point{V: b1}},
			Sample{Labels: l("le", "+Inf"), Point: Point{V: b2}},
		)
		got[sharedProcess] = vec(Sample{Labels: l("governor_signal", "cpu"), Point: Point{V: v1}})
		sigs := []Signal{RequestRate, ErrorRatio, ShedRatio, ShedRatioByClass, LatencyP50, LatencyP99, CPU, Memory}
		ans := derive(sigs, got, scope)
		if len(ans) != len(sigs) {
			t.Fatalf("%d answers for %d signals", len(ans), len(sigs))
		}
		q := map[Signal]Value{}
		for _, a := range ans {
			if a.err != nil || a.res == nil {
				t.Fatalf("%s: %v", a.sig, a.err)
			}
			for _, smp := range a.res.Samples {
				if smp.Labels["service"] != svc {
					t.Fatalf("%s: sample %s lost the service %q", a.sig, smp.Labels, svc)
				}
				if _, ok := smp.Labels["governor_signal"]; ok {
					t.Fatalf("%s: internal label leaked: %s", a.sig, smp.Labels)
				}
				v := classify(a.sig, smp.V)
				if a.sig.ratio() && v.Known() && (v.V < 0 || v.V > 1) {
					t.Fatalf("%s: ratio %v outside [0, 1]", a.sig, v.V)
				}
				q[a.sig] = v
			}
		}
		if p50, p99 := q[LatencyP50], q[LatencyP99]; p50.Known() && p99.Known() && p50.V > p99.V {
			t.Fatalf("p50 %v above p99 %v", p50.V, p99.V)
		}
	})
}
