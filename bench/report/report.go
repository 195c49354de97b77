// Package report turns the attempts of one overload run into the figures
// the laboratory publishes (goodput, latency percentiles, per-class success,
// shed and wasted work, recovery time), prints them as the JSON object of
// cmd/overload and renders RESULTS.md tables. The simulator and the live
// runner both produce Attempts, so both modes are measured by the same code.
package report

import (
	"math"
	"slices"
	"time"

	"governor.dev/governor/bench/scenario"
	"governor.dev/governor/sdk/rules"
)

// Outcome is how one attempt ended.
type Outcome uint8

// Attempt outcomes.
const (
	OK       Outcome = iota + 1 // admitted and answered within its deadline
	Late                        // admitted, answered after its deadline: wasted work
	Rejected                    // refused by the limiter
	Failed                      // transport error or no answer at all
)

// Attempt is one try of one request.
type Attempt struct {
	Request int32         // logical request number
	Class   uint8         // class rank, 0 critical .. 3 batch
	Try     uint8         // 0 for the first attempt
	Outcome Outcome       // how it ended
	Start   time.Duration // when it was sent, since the start of the run
	Latency time.Duration // time to the answer (rejections: time to the refusal)
}

// Result is one limiter's figures in one scenario: the object the issue
// specifies. Detail carries further figures for RESULTS.md only.
type Result struct {
	Limiter      string             `json:"limiter"`
	GoodputRPS   float64            `json:"goodput_rps"`
	GoodputRatio float64            `json:"goodput_ratio"`
	P50ms        float64            `json:"p50_ms"`
	P99ms        float64            `json:"p99_ms"`
	ClassSuccess map[string]float64 `json:"class_success"`
	ShedRatio    float64            `json:"shed_ratio"`
	WastedRatio  float64            `json:"wasted_ratio"`
	RecoveryS    float64            `json:"recovery_s"`
	Detail       Detail             `json:"-"`
}

// Detail holds figures beyond the published object.
type Detail struct {
	// Amplification is total attempts per first attempt.
	Amplification float64
	// OfferedRPS is the mean first-attempt rate.
	OfferedRPS float64
	// LimitShrinkS is how long after the first event began the limit first
	// fell to half its value before it, in 100 ms samples (both modes, for
	// limiters that expose a limit; -1 never, or no event).
	LimitShrinkS float64
	// Note explains anything unusual (e.g. a re-implementation).
	Note string
}

// Run is one scenario's results: the JSON cmd/overload prints.
type Run struct {
	Scenario    string   `json:"scenario"`
	Mode        string   `json:"mode"`
	CapacityRPS float64  `json:"capacity_rps"`
	Results     []Result `json:"results"`
}

// Measure computes a limiter's figures from its attempts.
func Measure(limiter string, s *scenario.Scenario, capacityRPS float64, attempts []Attempt) Result {
	r := Result{Limiter: limiter, ClassSuccess: map[string]float64{}}
	secs := int(math.Ceil(s.Length().Seconds()))
	good := make([]float64, secs)
	offered := make([]float64, secs)
	var ok, late, rejected, total, first int
	var lat []time.Duration
	type reqState struct {
		class   uint8
		success bool
	}
	reqs := map[int32]*reqState{}
	for _, a := range attempts {
		total++
		st := reqs[a.Request]
		if st == nil {
			st = &reqState{class: a.Class}
			reqs[a.Request] = st
		}
		if a.Try == 0 {
			first++
			if i := int(a.Start / time.Second); i >= 0 && i < secs {
				offered[i]++
			}
		}
		switch a.Outcome {
		case OK:
			ok++
			st.success = true
			lat = append(lat, a.Latency)
			if i := int((a.Start + a.Latency) / time.Second); i >= 0 && i < secs {
				good[i]++
			}
		case Late:
			late++
			lat = append(lat, a.Latency)
		case Rejected:
			rejected++
		}
	}
	ideal := 0.0
	for i := range secs {
		mid := time.Duration(i)*time.Second + time.Second/2
		ideal += min(offered[i], s.IdealCapacity(mid, capacityRPS))
	}
	d := s.Length().Seconds()
	r.GoodputRPS = float64(ok) / d
	if ideal > 0 {
		r.GoodputRatio = float64(ok) / ideal
	}
	slices.Sort(lat)
	r.P50ms = ms(quantile(lat, 0.5))
	r.P99ms = ms(quantile(lat, 0.99))
	var classReqs, classOK [4]int
	for _, st := range reqs {
		if int(st.class) < 4 {
			classReqs[st.class]++
			if st.success {
				classOK[st.class]++
			}
		}
	}
	for i, c := range rules.Classes {
		if classReqs[i] > 0 {
			r.ClassSuccess[string(c)] = float64(classOK[i]) / float64(classReqs[i])
		} else {
			r.ClassSuccess[string(c)] = 1
		}
	}
	if total > 0 {
		r.ShedRatio = float64(rejected) / float64(total)
	}
	if ok+late > 0 {
		r.WastedRatio = float64(late) / float64(ok+late)
	}
	r.RecoveryS = Recovery(good, s.LastDisturbanceEnd())
	if !s.Disturbed() {
		r.RecoveryS = 0
	}
	if first > 0 {
		r.Detail.Amplification = float64(total) / float64(first)
	}
	r.Detail.OfferedRPS = float64(first) / d
	r.Detail.LimitShrinkS = -1
	return r
}

// Recovery is the time after from until goodput stays within 10% of its
// final level. good holds per-second goodput; it is smoothed over three
// seconds so Poisson noise at low rates does not count as a disturbance. The
// final level is the mean of the last three seconds (the very last bucket
// is left out when the run has more than four: it holds only the answers
// that beat the end). It returns 0 when from is negative (no disturbance) or
// goodput never left the band, and the time to the end of the run when it
// never settled.
func Recovery(good []float64, from time.Duration) float64 {
	n := len(good)
	if n > 4 {
		n-- // the last second is cut short by the end of the run
	}
	if n == 0 || from < 0 {
		return 0
	}
	smooth := make([]float64, n)
	for i := range n {
		lo, hi := max(0, i-1), min(n-1, i+1)
		for _, g := range good[lo : hi+1] {
			smooth[i] += g
		}
		smooth[i] /= float64(hi - lo + 1)
	}
	k := min(3, n)
	final := 0.0
	for _, g := range good[n-k : n] {
		final += g
	}
	final /= float64(k)
	start := int(from / time.Second)
	if start >= n {
		return 0
	}
	settled := n
	for i := n - 1; i >= start; i-- {
		if math.Abs(smooth[i]-final) > 0.1*final {
			break
		}
		settled = i
	}
	if settled <= start {
		return 0
	}
	return float64(settled) - from.Seconds()
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }
