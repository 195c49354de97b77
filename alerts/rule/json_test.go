package rule

import (
	"context"
	"encoding/json"
	"math"
	"testing"
	"time"

	"governor.dev/governor/alerts"
)

// TestActiveJSONKeepsNonFiniteValues: errors / requests > 0.5 returns +Inf
// while requests is 0, and NaN passes a != comparison; such an alert state
// must be persisted and read back, and a state stored as a plain number
// still loads.
func TestActiveJSONKeepsNonFiniteValues(t *testing.T) {
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0.25} {
		a := Active{Rule: "R", Labels: alerts.Labels{"alertname": "R"}, State: alerts.StateFiring, Value: v,
			ActiveAt: time.Unix(100, 0).UTC()}
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatalf("marshal value %v: %v", v, err)
		}
		var got Active
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("unmarshal %s: %v", b, err)
		}
		if !(got.Value == v || (math.IsNaN(v) && math.IsNaN(got.Value))) || got.Rule != "R" || got.State != alerts.StateFiring ||
			!got.ActiveAt.Equal(a.ActiveAt) {
			t.Fatalf("round trip of %v: %+v from %s", v, got, b)
		}
	}
	var old Active
	if err := json.Unmarshal([]byte(`{"rule":"R","labels":{"alertname":"R"},"state":2,"value":1.5,"active_at":"2026-01-01T00:00:00Z"}`), &old); err != nil ||
		old.Value != 1.5 || old.State != alerts.StateFiring || old.Rule != "R" {
		t.Fatalf("state stored as a number: %+v %v", old, err)
	}
	if err := json.Unmarshal([]byte(`{"value":"high"}`), &old); err == nil {
		t.Fatal("a value that is no number accepted")
	}
}

// TestAlertWithInfiniteValueFiresAndPersists: a sample of value +Inf
// raises its alert, and the evaluator's states still encode.
func TestAlertWithInfiniteValueFiresAndPersists(t *testing.T) {
	e, err := NewEvaluator([]Rule{{Name: "Ratio", Expr: "x", Severity: alerts.P1}})
	if err != nil {
		t.Fatal(err)
	}
	q := func(context.Context, string, time.Time) ([]Sample, error) {
		return []Sample{{Labels: map[string]string{"service": "a"}, Value: math.Inf(1)}}, nil
	}
	res := e.Eval(context.Background(), time.Unix(100, 0), q)
	if len(res.Alerts) != 1 {
		t.Fatalf("alerts %+v", res.Alerts)
	}
	if _, err := json.Marshal(e.States()); err != nil {
		t.Fatalf("states do not encode: %v", err)
	}
}

// FuzzActiveJSON: any saved state that decodes re-encodes, and decodes again
// to the same value (NaN included).
func FuzzActiveJSON(f *testing.F) {
	f.Add([]byte(`{"rule":"High","value":1.5}`))
	f.Add([]byte(`{"rule":"High","value":"+Inf"}`))
	f.Add([]byte(`{"rule":"High","value":"NaN","labels":{"a":"b"}}`))
	f.Add([]byte(`{"value":"1e400"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var a Active
		if json.Unmarshal(b, &a) != nil {
			return
		}
		out, err := json.Marshal(a)
		if err != nil {
			t.Fatalf("re-encoding %q: %v", b, err)
		}
		var back Active
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("decoding %s: %v", out, err)
		}
		if back.Value != a.Value && !(math.IsNaN(back.Value) && math.IsNaN(a.Value)) {
			t.Fatalf("value %v came back as %v", a.Value, back.Value)
		}
	})
}
