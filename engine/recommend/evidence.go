package recommend

import (
	"encoding/json"
	"math"
	"time"

	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/pid"
	"governor.dev/governor/engine/signals"
)

// Evidence is why the engine recommends what it does; it is stored with the
// proposed version (versioning.Proposal.Evidence).
type Evidence struct {
	At        time.Time `json:"at"`
	Setpoint  float64   `json:"setpoint"`
	LoadScore float64   `json:"load_score"`
	// Terms are the load score's term contributions.
	Terms []loadscore.Contribution `json:"terms"`
	// Signals are the service-level readings (null when unknown).
	Signals map[signals.Signal]*float64 `json:"signals"`
	// PID is the controller's last step: P, I and D terms, output.
	PID pid.State `json:"pid"`
	// Detector is the healthy-baseline state behind breaker and alert
	// thresholds.
	Detector Detector `json:"detector"`
	// Breakers are the downstream breaker slow-call changes derived from
	// the healthy baseline; BreakerNote says why there are none.
	Breakers    []BreakerChange `json:"breakers,omitempty"`
	BreakerNote string          `json:"breaker_note,omitempty"`
	Ceiling     Ceiling         `json:"ceiling"`
	// Concurrency is the per-route concurrency upper bound, from and to.
	Concurrency map[string][2]int `json:"concurrency,omitempty"`
	// ExpectedEffect says what the change should do, in words.
	ExpectedEffect string `json:"expected_effect"`
	// ExpectedShedRatio is the share of the current offered rate the new
	// ceiling would refuse; ExpectedScore the load score it should bring.
	ExpectedShedRatio float64 `json:"expected_shed_ratio"`
	ExpectedScore     float64 `json:"expected_score"`
	// Confidence in [0, 1]: how complete and settled the data was.
	Confidence float64 `json:"confidence"`
	// KnownScores is how many consecutive known load scores preceded this.
	KnownScores int `json:"known_scores"`
}

// Ceiling is the service-wide rate ceiling and its per-instance split.
type Ceiling struct {
	// From and To are service-wide, in requests per second.
	From float64 `json:"from"`
	To   float64 `json:"to"`
	// Instances is the live instance count the split used.
	Instances int `json:"instances"`
	// Routes is the service-wide rate of each rate-limited route (the
	// per-instance rule is this divided by Instances).
	Routes map[string]float64 `json:"routes"`
	// PerInstance is each route's per-instance rate after the change.
	PerInstance map[string]float64 `json:"per_instance"`
}

// Detector is the threshold recommender's state for the evidence.
type Detector struct {
	Inconclusive      bool    `json:"inconclusive"`
	Reason            string  `json:"reason,omitempty"`
	HealthyIntervals  int     `json:"healthy_intervals"`
	Intervals         int     `json:"intervals"`
	BaselineP99       float64 `json:"baseline_p99"`
	SlowCallThreshold float64 `json:"slow_call_threshold"`
	LatencyWarn       float64 `json:"latency_warn"`
	LatencyCritical   float64 `json:"latency_critical"`
	PeakThroughput    float64 `json:"peak_throughput"`
}

// ceilingOf reads the service-wide ceiling an engine version recorded in its
// evidence; ok is false for versions without one.
func ceilingOf(raw json.RawMessage) (Ceiling, bool) {
	c, ok := decodeCeiling(raw)
	if !ok || !(c.To > 0) || len(c.Routes) == 0 {
		return Ceiling{}, false
	}
	return c, true
}

// decodeCeiling decodes the "ceiling" member of a version's evidence as
// it is, zero when absent; ok is false for evidence that is empty or not a
// JSON object that decodes.
func decodeCeiling(raw json.RawMessage) (Ceiling, bool) {
	if len(raw) == 0 {
		return Ceiling{}, false
	}
	var e struct {
		Ceiling Ceiling `json:"ceiling"`
	}
	if json.Unmarshal(raw, &e) != nil {
		return Ceiling{}, false
	}
	return e.Ceiling, true
}

func num(v signals.Value) *float64 {
	f, ok := v.Get()
	if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return &f
}
