package manager

import (
	"context"
	"fmt"
	"time"

	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/engine/signals"
)

// QueryFromSource adapts the engine's metrics source (Prometheus or the
// embedded store) to the rules' QueryFunc. A scalar result counts as one
// series without labels; other result types are refused.
func QueryFromSource(src signals.Source) rule.QueryFunc {
	return func(ctx context.Context, q string, t time.Time) ([]rule.Sample, error) {
		res, err := src.Query(ctx, q, t)
		if err != nil {
			return nil, err
		}
		switch res.Type {
		case signals.TypeVector:
			out := make([]rule.Sample, 0, len(res.Samples))
			for _, s := range res.Samples {
				out = append(out, rule.Sample{Labels: s.Labels, Value: s.V})
			}
			return out, nil
		case signals.TypeScalar:
			if len(res.Samples) == 1 {
				return []rule.Sample{{Labels: map[string]string{}, Value: res.Samples[0].V}}, nil
			}
			return nil, nil
		case signals.TypeNone:
			return nil, nil
		}
		return nil, fmt.Errorf("%w: %q returned a %s, want a vector", signals.ErrQuery, q, res.Type)
	}
}
