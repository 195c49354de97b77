package recommend

import (
	"fmt"
	"math"
	"strings"
	"time"

	"governor.dev/governor/sdk/rules"
)

// sdkDefaultSlowCall is the slow-call threshold the SDK uses when a breaker
// leaves slow_call unset (sdk/breaker.DefaultSlowCall).
const sdkDefaultSlowCall = time.Second

// BreakerChange is a proposed change of one downstream breaker's slow-call
// threshold and the baseline behind it.
type BreakerChange struct {
	Downstream string `json:"downstream"`
	// From and To are the slow-call thresholds in seconds (From is the
	// SDK default of 1 s when the ruleset left it unset).
	From float64 `json:"from"`
	To   float64 `json:"to"`
	// BaselineP99 is the healthy p99 latency baseline in seconds,
	// Recommended the threshold engine/thresholds derived from it (before
	// rounding and bounds), HealthyIntervals how many intervals shaped it.
	BaselineP99      float64 `json:"baseline_p99"`
	Recommended      float64 `json:"recommended"`
	HealthyIntervals int     `json:"healthy_intervals"`
	// Why says how To was derived, in words.
	Why string `json:"why"`
}

// planBreakers derives the breaker slow-call changes for ruleset rs from
// the detector state. It returns the changes and, when there are none, a
// note saying why. Only downstreams with a breaker of kind breaker that
// counts slow calls are changed: throttling has no slow-call threshold, and
// a breaker whose slow_call_ratio is unset or 1 ignores slow_call (the SDK
// counts slow calls only below 1), so tuning it would change nothing. A
// change smaller than the relative deadband is not proposed, so the
// threshold does not flap with the baseline.
func planBreakers(rs *rules.Ruleset, det Detector, o *Options) ([]BreakerChange, string) {
	if det.Inconclusive {
		return nil, "breaker thresholds unchanged: baselines inconclusive (" + det.Reason + ")"
	}
	if !(det.SlowCallThreshold > 0) || math.IsInf(det.SlowCallThreshold, 0) {
		return nil, fmt.Sprintf("breaker thresholds unchanged: no usable slow-call threshold (%v s)", det.SlowCallThreshold)
	}
	target, bound := boundSlowCall(det.SlowCallThreshold, o.SlowCallMin, o.SlowCallMax)
	var out []BreakerChange
	var within, off []string
	breakers := 0
	for _, d := range rs.Downstreams {
		b := d.Breaker
		if b == nil || b.Kind == rules.BreakerKindThrottle {
			continue
		}
		if !slowCallsCounted(b) {
			off = append(off, d.Name)
			continue
		}
		breakers++
		cur := b.SlowCall.D()
		if cur <= 0 {
			cur = sdkDefaultSlowCall
		}
		to, why := target, bound
		if d.Timeout > 0 && to > d.Timeout.D() {
			to, why = d.Timeout.D(), fmt.Sprintf("capped at the downstream timeout %s", d.Timeout.D())
		}
		if math.Abs(to.Seconds()/cur.Seconds()-1) < o.SlowCallDeadband {
			within = append(within, fmt.Sprintf("%s %s", d.Name, cur))
			continue
		}
		text := fmt.Sprintf("%s: slow_call %s -> %s: %.4g x the healthy p99 baseline %s over %d healthy intervals",
			d.Name, cur, to, det.SlowCallThreshold/det.BaselineP99, secs(det.BaselineP99), det.HealthyIntervals)
		if why != "" {
			text += ", " + why
		}
		out = append(out, BreakerChange{Downstream: d.Name, From: cur.Seconds(), To: to.Seconds(),
			BaselineP99: det.BaselineP99, Recommended: det.SlowCallThreshold, HealthyIntervals: det.HealthyIntervals, Why: text})
	}
	offNote := ""
	if len(off) > 0 {
		offNote = fmt.Sprintf("slow-call detection off (slow_call_ratio unset or 1) on %s", strings.Join(off, ", "))
	}
	switch {
	case len(out) > 0:
		return out, ""
	case breakers == 0 && offNote != "":
		return nil, "breaker thresholds unchanged: " + offNote
	case breakers == 0:
		return nil, "breaker thresholds unchanged: no downstream breaker"
	default:
		note := fmt.Sprintf("breaker thresholds unchanged: slow_call (%s) within %.0f%% of the recommended %s (healthy p99 baseline %s)",
			strings.Join(within, ", "), 100*o.SlowCallDeadband, target, secs(det.BaselineP99))
		if offNote != "" {
			note += "; " + offNote
		}
		return nil, note
	}
}

// slowCallsCounted reports whether breaker b counts slow calls, so that its
// slow_call threshold has an effect: the SDK (sdk/breaker) reads an unset
// slow_call_ratio as 1 and counts slow calls only below 1.
func slowCallsCounted(b *rules.Breaker) bool {
	return b.SlowCallRatio > 0 && b.SlowCallRatio < 1
}

// boundSlowCall rounds a threshold in seconds to two significant digits
// (whole milliseconds at least), so small baseline drifts give the same
// value, and keeps it within [lo, hi]; the note says when a bound applied.
func boundSlowCall(s float64, lo, hi time.Duration) (time.Duration, string) {
	ms := s * 1000
	if ms >= 1 {
		p := math.Pow(10, math.Floor(math.Log10(ms))-1)
		ms = math.Round(ms/p) * p
	}
	d := time.Duration(math.Round(ms)) * time.Millisecond
	switch {
	case d < lo:
		return lo, fmt.Sprintf("raised to the minimum %s", lo)
	case d > hi:
		return hi, fmt.Sprintf("lowered to the maximum %s", hi)
	}
	return d, ""
}

// applyBreakers sets the slow-call thresholds of changes in rs (a copy the
// caller owns), keeping every other breaker field.
func applyBreakers(rs *rules.Ruleset, changes []BreakerChange) {
	for _, c := range changes {
		for i := range rs.Downstreams {
			if d := &rs.Downstreams[i]; d.Name == c.Downstream && d.Breaker != nil {
				d.Breaker.SlowCall = rules.Duration(time.Duration(math.Round(c.To * 1e9)))
			}
		}
	}
}

// breakerSummary is the breaker part of the expected effect.
func breakerSummary(changes []BreakerChange) string {
	parts := make([]string, len(changes))
	for i, c := range changes {
		parts[i] = c.Why
	}
	return "breaker " + strings.Join(parts, "; ")
}

// secs is s seconds as a duration of three significant digits.
func secs(s float64) time.Duration {
	ns := s * 1e9
	if !(ns >= 1) || math.IsInf(ns, 0) {
		return time.Duration(0)
	}
	p := math.Pow(10, math.Floor(math.Log10(ns))-2)
	return time.Duration(math.Round(ns/p) * p)
}
