package loadscore

import (
	"fmt"
	"math"
	"strconv"

	"governor.dev/governor/engine/signals"
)

// Contribution explains one term of a score.
type Contribution struct {
	Term Term `json:"term"`
	// Input is the signal reading the term is made from (for inflight, the
	// in-flight count; Target then holds the limit).
	Input signals.Value `json:"input"`
	// Target is the value the input is divided by.
	Target float64 `json:"target"`
	// Normalized is min(max(Input/Target, 0), 1); NaN when unknown.
	Normalized float64 `json:"normalized"`
	// Weight is the configured weight; EffectiveWeight the share after
	// unknown terms' weight was redistributed (0 for unknown terms).
	Weight          float64 `json:"weight"`
	EffectiveWeight float64 `json:"effectiveWeight"`
	// Contribution is EffectiveWeight × Normalized; the known terms'
	// contributions sum to the raw score.
	Contribution float64 `json:"contribution"`
	Known        bool    `json:"known"`
	// Reason says why an unknown term is unknown.
	Reason string `json:"reason,omitempty"`
}

// Raw is the unsmoothed score of one evaluation.
type Raw struct {
	// Score is in [0, 1]; NaN when not Known.
	Score float64
	Known bool
	// KnownWeight is the share of the configured weight that was known.
	KnownWeight float64
	Terms       []Contribution
	// Reason says why the score is unknown.
	Reason string
}

// Compute scores one entry without smoothing. It is a pure function of the
// options and the entry; Tracker builds on it.
func Compute(opts *Options, e *signals.Entry) Raw {
	t := opts.targetsFor(e.Key.Service)
	raw := Raw{Terms: make([]Contribution, 0, len(opts.Weights))}
	var total, known, sum float64
	for _, term := range Terms {
		w := opts.Weights[term]
		if w <= 0 {
			continue
		}
		c := term.contribution(e, t)
		c.Weight = w
		total += w
		if c.Known {
			known += w
			sum += w * c.Normalized
		}
		raw.Terms = append(raw.Terms, c)
	}
	raw.KnownWeight = known / total
	// The share is a quotient of float sums: when it equals MinKnownWeight
	// in decimal (0.3 of 0.4 known against 0.75) it may come out an ulp
	// below it, so the comparison allows for rounding.
	// Nothing known is unknown whatever MinKnownWeight: 0/0 would be a
	// NaN score, kept in the smoothed average for good.
	if known == 0 || raw.KnownWeight < opts.MinKnownWeight-shareTolerance {
		raw.Score = math.NaN()
		raw.Reason = fmt.Sprintf("known weight %.2f below the required %.2f", raw.KnownWeight, opts.MinKnownWeight)
		return raw
	}
	raw.Known, raw.Score = true, sum/known
	for i := range raw.Terms {
		c := &raw.Terms[i]
		if c.Known {
			c.EffectiveWeight = c.Weight / known
			c.Contribution = c.EffectiveWeight * c.Normalized
		}
	}
	return raw
}

// shareTolerance is how far below MinKnownWeight a known share may come out
// by rounding and still count as reaching it.
const shareTolerance = 1e-9

func (term Term) contribution(e *signals.Entry, t Targets) Contribution {
	c := Contribution{Term: term, Normalized: math.NaN()}
	switch term {
	case CPU:
		c.Input, c.Target = e.Get(signals.CPU), t.CPUCores
	case Memory:
		c.Input, c.Target = e.Get(signals.Memory), t.MemoryBytes
	case Latency:
		c.Input, c.Target = e.Get(signals.LatencyP99), t.Latency.Seconds()
	case Queue:
		c.Input, c.Target = e.Get(signals.QueueDelayP99), t.QueueDelay.Seconds()
	case InFlight:
		c.Input = e.Get(signals.InFlight)
		limit := checked(e.Get(signals.Limit))
		switch {
		case !limit.Known():
			c.Reason = "limit " + limit.String()
			return c
		case !(limit.V > 0):
			c.Reason = fmt.Sprintf("limit is %g", limit.V)
			return c
		}
		c.Target = limit.V
	}
	c.Input = checked(c.Input)
	if !c.Input.Known() {
		c.Reason = c.Input.String()
		return c
	}
	c.Known = true
	c.Normalized = min(max(c.Input.V/c.Target, 0), 1)
	return c
}

// checked turns a known value that is not a finite number (a snapshot not
// built by signals.Reader, which classifies them itself) into an unknown
// one: a NaN would make the score NaN and stay in the smoothed average for
// good.
func checked(v signals.Value) signals.Value {
	if v.Known() && (math.IsNaN(v.V) || math.IsInf(v.V, 0)) {
		return signals.Unknown(signals.NotFinite, strconv.FormatFloat(v.V, 'g', -1, 64))
	}
	return v
}
