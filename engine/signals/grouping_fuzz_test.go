package signals_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"governor.dev/governor/engine/signals"
)

// FuzzTemplateGrouping feeds arbitrary text as a template override and
// checks the grouping validation against Prometheus's own engine: a
// template is refused with ErrInvalidOption or accepted, never panics, and
// an accepted template, run on a fleet with several instances, routes,
// classes and outcomes, answers samples that carry no label beyond the
// scope's (so at most one per key).
func FuzzTemplateGrouping(f *testing.F) {
	for _, s := range []string{
		signals.DefaultTemplates()[signals.CPU],
		signals.DefaultTemplates()[signals.ErrorRatio],
		signals.DefaultTemplates()[signals.LatencyP99],
		`sum by ({{.By}}) (governor_sdk_inflight{ {{.Selector}} })`,
		`topk(1, sum by ({{.By}}) (governor_sdk_inflight{ {{.Selector}} }))`,
		`sum by ({{.By}}) (governor_sdk_inflight) * on (service) group_left sum by (service) (governor_sdk_limit)`,
		`sum by ({{.By}}) (governor_sdk_inflight) / ignoring (route) sum by ({{.By}}) (governor_sdk_limit)`,
		`label_replace(sum by ({{.By}}) (governor_sdk_inflight), "x", "y", "", "")`,
		`count_values by ({{.By}}) ("v", governor_sdk_limit)`,
		`max_over_time(sum by ({{.By}}) (rate(governor_sdk_requests_total[{{.Window}}]))[2m:30s])`,
		`sum by ({{.By}}) (governor_sdk_inflight) or on (service) governor_sdk_limit`,
		`governor_sdk_inflight{ {{.Selector}} }`,
		`sum without (route) (governor_sdk_inflight)`,
	} {
		f.Add(s)
	}
	db := openEdgeStore(f)
	at := sharedT0.Add(3 * time.Minute)
	f.Fuzz(func(t *testing.T, tmpl string) {
		r, err := signals.NewReader(db, signals.ReaderOptions{Templates: map[signals.Signal]string{signals.CPU: tmpl}})
		if err != nil {
			if !errors.Is(err, signals.ErrInvalidOption) {
				t.Fatalf("error without the sentinel: %v", err)
			}
			return
		}
		for _, scope := range []signals.Scope{signals.PerService, signals.PerInstance} {
			q, err := r.Query(signals.CPU, scope)
			if err != nil {
				return // renders differently at read time: the reader fails only this signal
			}
			res, err := db.Query(context.Background(), q, at)
			if err != nil {
				return // a query error, not a grouping one
			}
			for _, s := range res.Samples {
				for name := range s.Labels {
					if name != "service" && (scope != signals.PerInstance || name != "instance") {
						t.Fatalf("accepted template answers label %q for scope %s: %s\n%s", name, scope, s.Labels, q)
					}
				}
			}
		}
	})
}
