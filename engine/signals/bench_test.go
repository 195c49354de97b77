package signals_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
)

// fillFleet writes the SDK series of services x instances (four classes, a
// 14-bucket latency histogram, gauges), one sample every 15 s for 5 minutes.
func fillFleet(b *testing.B, db *embedded.DB, services, instances int) {
	buckets := []string{"0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "+Inf"}
	for step := 0; step <= 20; step++ {
		app := db.Appender(context.Background())
		ts := sharedT0.Add(time.Duration(step) * 15 * time.Second).UnixMilli()
		add := func(v float64, kv ...string) {
			if _, err := app.Append(0, labels.FromStrings(kv...), ts, v); err != nil {
				b.Fatal(err)
			}
		}
		for s := range services {
			svc := fmt.Sprintf("svc-%04d", s)
			for i := range instances {
				n := float64(step) * 1500 * float64(1+s%10) / 10
				base := func(name string, kv ...string) []string {
					return append([]string{"__name__", name, "job", "sdk", "service", svc, "instance", svc + ":" + strconv.Itoa(i)}, kv...)
				}
				for _, c := range []string{"critical", "core", "browse", "batch"} {
					add(n, base("governor_sdk_requests_total", "class", c, "outcome", "admitted")...)
					add(n/50, base("governor_sdk_requests_total", "class", c, "outcome", "shed")...)
					add(n/1000, base("governor_sdk_request_errors_total", "class", c)...)
				}
				for k, le := range buckets {
					add(4*n*min(1, float64(k+1)/10), base("governor_sdk_request_duration_seconds_bucket", "le", le)...)
				}
				add(20, base("governor_sdk_inflight")...)
				add(25, base("governor_sdk_limit")...)
				add(1, base("governor_sdk_rules_version")...)
			}
		}
		if err := app.Commit(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRead is one Read of 200 services x 10 instances from the
// embedded store: the shared rate queries evaluated from the store's
// samples (series), the shared queries all sent as PromQL (shared), and one
// query per signal (per_signal).
func BenchmarkRead(b *testing.B) {
	db, err := embedded.Open(embedded.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	fillFleet(b, db, 200, 10)
	at := sharedT0.Add(5 * time.Minute)
	for _, c := range []struct {
		name      string
		src       signals.Source
		perSignal bool
	}{
		{"series", db, false},
		{"shared", promqlOnly{db}, false},
		{"per_signal", db, true},
	} {
		r, err := signals.NewReader(c.src, signals.ReaderOptions{MaxAge: -1, PerSignal: c.perSignal})
		if err != nil {
			b.Fatal(err)
		}
		for _, scope := range []signals.Scope{signals.PerService, signals.PerInstance} {
			b.Run(c.name+"/"+scope.String(), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := r.Read(context.Background(), at, scope); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
