package promapi

import (
	"fmt"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"governor.dev/governor/engine/signals"
)

// convert turns an API answer into a signals.Result, keeping warnings and
// infos (as "info: ..."), and reporting dropped native histogram samples.
func convert(v model.Value, warns v1.Warnings, infos v1.Infos) (*signals.Result, error) {
	out := &signals.Result{Warnings: append([]string(nil), warns...)}
	for _, i := range infos {
		out.Warnings = append(out.Warnings, signals.InfoPrefix+i)
	}
	dropped := 0
	switch v := v.(type) {
	case model.Vector:
		out.Type = signals.TypeVector
		out.Samples = make([]signals.Sample, 0, len(v))
		for _, s := range v {
			if s.Histogram != nil {
				dropped++
				continue
			}
			out.Samples = append(out.Samples, signals.Sample{Labels: toLabels(s.Metric), Point: point(s.Timestamp, s.Value)})
		}
	case model.Matrix:
		out.Type = signals.TypeMatrix
		out.Series = make([]signals.Series, 0, len(v))
		for _, s := range v {
			dropped += len(s.Histograms)
			if len(s.Values) == 0 {
				continue
			}
			ps := make([]signals.Point, len(s.Values))
			for i, p := range s.Values {
				ps[i] = point(p.Timestamp, p.Value)
			}
			out.Series = append(out.Series, signals.Series{Labels: toLabels(s.Metric), Points: ps})
		}
	case *model.Scalar:
		out.Type = signals.TypeScalar
		out.Samples = []signals.Sample{{Labels: signals.Labels{}, Point: point(v.Timestamp, v.Value)}}
	default:
		return nil, fmt.Errorf("%w: unexpected result type %T", signals.ErrQuery, v)
	}
	if dropped > 0 {
		out.Warnings = append(out.Warnings, fmt.Sprintf(signals.InfoPrefix+"%d native histogram samples dropped", dropped))
	}
	return out, nil
}

func point(t model.Time, v model.SampleValue) signals.Point {
	return signals.Point{T: time.UnixMilli(int64(t)), V: float64(v)}
}

func toLabels(m model.Metric) signals.Labels {
	out := make(signals.Labels, len(m))
	for k, v := range m {
		out[string(k)] = string(v)
	}
	return out
}
