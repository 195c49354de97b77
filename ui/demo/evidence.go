package demo

import (
	"encoding/json"
	"fmt"
	"time"

	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/pid"
	"governor.dev/governor/engine/recommend"
	"governor.dev/governor/engine/signals"
)

// Instances is how many instances each demo service runs (the rollout's
// SYNCED count in a calm step).
const Instances = 40

// EngineEvidence is the evidence the engine would store with a proposal to
// move service's per-instance rate limit of route "api" from `from` to `to`
// req/s at a load score of 0.91: the engine's own format
// (engine/recommend.Evidence with the proposer's auto_apply, policy,
// hour_reference, band and band_source), so that the UI explains it as it
// explains the engine's proposals.
func EngineEvidence(service string, at time.Time, from, to float64) (json.RawMessage, error) {
	const (
		score    = 0.91
		setpoint = 0.7
		p99      = 0.61 // s
		target   = 0.4  // s, the latency term's target
		rate     = 21000.0
	)
	known := func(f float64) *float64 { return &f }
	ceilFrom, ceilTo := from*Instances, to*Instances
	term := func(t loadscore.Term, in, tgt, w, ew float64) loadscore.Contribution {
		n := min(max(in/tgt, 0), 1)
		return loadscore.Contribution{Term: t, Input: signals.KnownValue(in), Target: tgt, Normalized: n,
			Weight: w, EffectiveWeight: ew, Contribution: ew * n, Known: true}
	}
	terms := []loadscore.Contribution{
		term(loadscore.CPU, 3.6, 4, 0.3, 1.0/3),
		term(loadscore.Latency, p99, target, 0.3, 1.0/3),
		term(loadscore.InFlight, 200, 240, 0.3, 1.0/3),
		{Term: loadscore.Queue, Input: signals.Unknown(signals.Missing, "no queue delay metric for "+service),
			Target: 0.05, Weight: 0.1, Known: false, Reason: "no queue delay metric"},
	}
	// P + I + D is the ceiling the controller asks for, in req/s; the
	// integral holds the ceiling in force before the step.
	p, d := -0.21*12000.0, -0.03*12000.0
	i := ceilTo - p - d
	band := recommend.Band{MaxChangePerHour: 0.1}
	applies, why := band.Allows(ceilFrom, ceilTo)
	ev := recommend.Evidence{
		At: at, Setpoint: setpoint, LoadScore: score, Terms: terms,
		Signals: map[signals.Signal]*float64{
			signals.RequestRate: known(rate), signals.ErrorRatio: known(0.012),
			signals.LatencyP50: known(0.12), signals.LatencyP99: known(p99),
			signals.InFlight: known(200), signals.ShedRatio: known(0.05), signals.CPU: known(3.6),
			signals.QueueDelayP99: nil,
		},
		PID: pid.State{Time: at, Mode: pid.Auto, Setpoint: setpoint, Measurement: score, Error: setpoint - score,
			P: p, I: i, D: d, Unlimited: p + i + d, Output: ceilTo, Interval: 15 * time.Second},
		Detector: recommend.Detector{HealthyIntervals: 42, Intervals: 60, BaselineP99: 0.18, SlowCallThreshold: 0.36,
			LatencyWarn: 0.3, LatencyCritical: 0.5, PeakThroughput: 19500},
		BreakerNote: "no downstream latency above its healthy baseline",
		Ceiling: recommend.Ceiling{From: ceilFrom, To: ceilTo, Instances: Instances,
			Routes: map[string]float64{"api": ceilTo}, PerInstance: map[string]float64{"api": to}},
		ExpectedEffect: fmt.Sprintf("shed about %.0f%% of the offered %.0f req/s; load score from %.2f toward %.2f within a few minutes",
			100*(1-ceilTo/rate), rate, score, 0.72),
		ExpectedShedRatio: 1 - ceilTo/rate,
		ExpectedScore:     0.72,
		Confidence:        0.8,
		KnownScores:       12,
	}
	return json.Marshal(struct {
		*recommend.Evidence
		AutoApply  bool           `json:"auto_apply"`
		Policy     string         `json:"policy"`
		Reference  float64        `json:"hour_reference"`
		Band       recommend.Band `json:"band"`
		BandSource string         `json:"band_source"`
	}{&ev, applies, why, ceilFrom, band, recommend.BandFromConfig})
}
