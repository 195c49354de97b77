package pages

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/model"
)

// engineEvidence is the JSON the engine stores with its proposals
// (engine/recommend.Evidence, plus the proposer's auto_apply, policy and
// hour_reference). It is decoded here, not through the engine's types, so
// that the page reads the stored JSON as it is.
type engineEvidence struct {
	At        time.Time `json:"at"`
	Setpoint  float64   `json:"setpoint"`
	LoadScore float64   `json:"load_score"`
	Terms     []struct {
		Term  string `json:"term"`
		Input struct {
			Value  *float64 `json:"value"`
			Status string   `json:"status"`
		} `json:"input"`
		Target          float64 `json:"target"`
		Normalized      float64 `json:"normalized"`
		Weight          float64 `json:"weight"`
		EffectiveWeight float64 `json:"effectiveWeight"`
		Contribution    float64 `json:"contribution"`
		Known           bool    `json:"known"`
		Reason          string  `json:"reason"`
	} `json:"terms"`
	Signals map[string]*float64 `json:"signals"`
	PID     struct {
		Time        time.Time `json:"time"`
		Mode        string    `json:"mode"`
		Setpoint    float64   `json:"setpoint"`
		Measurement float64   `json:"measurement"`
		Error       float64   `json:"error"`
		P           float64   `json:"p"`
		I           float64   `json:"i"`
		D           float64   `json:"d"`
		Unlimited   float64   `json:"unlimited"`
		Output      float64   `json:"output"`
		Saturated   bool      `json:"saturated"`
	} `json:"pid"`
	Detector struct {
		Inconclusive      bool    `json:"inconclusive"`
		Reason            string  `json:"reason"`
		HealthyIntervals  int     `json:"healthy_intervals"`
		Intervals         int     `json:"intervals"`
		BaselineP99       float64 `json:"baseline_p99"`
		SlowCallThreshold float64 `json:"slow_call_threshold"`
		LatencyWarn       float64 `json:"latency_warn"`
		LatencyCritical   float64 `json:"latency_critical"`
		PeakThroughput    float64 `json:"peak_throughput"`
	} `json:"detector"`
	Breakers []struct {
		Downstream       string  `json:"downstream"`
		From             float64 `json:"from"`
		To               float64 `json:"to"`
		BaselineP99      float64 `json:"baseline_p99"`
		HealthyIntervals int     `json:"healthy_intervals"`
		Why              string  `json:"why"`
	} `json:"breakers"`
	BreakerNote string `json:"breaker_note"`
	Ceiling     struct {
		From        float64            `json:"from"`
		To          float64            `json:"to"`
		Instances   int                `json:"instances"`
		Routes      map[string]float64 `json:"routes"`
		PerInstance map[string]float64 `json:"per_instance"`
	} `json:"ceiling"`
	Concurrency       map[string][2]int `json:"concurrency"`
	ExpectedEffect    string            `json:"expected_effect"`
	ExpectedShedRatio float64           `json:"expected_shed_ratio"`
	ExpectedScore     float64           `json:"expected_score"`
	Confidence        float64           `json:"confidence"`
	KnownScores       int               `json:"known_scores"`
	AutoApply         *bool             `json:"auto_apply"`
	Policy            string            `json:"policy"`
	HourReference     float64           `json:"hour_reference"`
	// Band is the auto-apply band the decision used, BandSource where it
	// came from ("policy" or "config"); both absent in older evidence.
	Band *struct {
		Manual           bool    `json:"manual"`
		MaxChangePerHour float64 `json:"max_change_per_hour"`
		Floor            float64 `json:"floor"`
		Ceiling          float64 `json:"ceiling"`
	} `json:"band"`
	BandSource string `json:"band_source"`
}

// parseEngineEvidence decodes engine evidence; ok is false for anything
// else (a person's free-form evidence, or none).
func parseEngineEvidence(raw json.RawMessage) (engineEvidence, bool) {
	var e engineEvidence
	if len(raw) == 0 || json.Unmarshal(raw, &e) != nil {
		return e, false
	}
	return e, !e.At.IsZero() && e.ExpectedEffect != ""
}

// evidenceWindow is how far before a recommendation its charts reach.
const evidenceWindow = 30 * time.Minute

// Act and release bands of the load score (engine/loadscore defaults).
const (
	actAbove     = 0.8
	releaseBelow = 0.5
)

// evidenceView is engine evidence as the page shows it.
type evidenceView struct {
	At     time.Time
	Effect string
	// Confidence in percent and what it rests on.
	Confidence      string
	ConfidenceBasis []string
	// Verdict is the band's: "yes" (applies itself), "no" (waits for
	// approval) or "" (not recorded); Policy its reason.
	Verdict       string
	Policy        string
	HourReference string
	// Band describes the auto-apply band the verdict used.
	Band   string
	Charts []evidenceChart
	// ChartsFrom says where the charts' data comes from.
	ChartsFrom  string
	Score       string
	Setpoint    string
	Terms       []termRow
	TermSum     string
	PID         *pidView
	Detector    detectorView
	Ceiling     []ceilingRow
	CeilingSum  string
	Breakers    []breakerRow
	BreakerNote string
}

type evidenceChart struct {
	Title, Unit string
	SVG         template.HTML
	// AtProposal is the evidence's own reading.
	AtProposal string
}

type termRow struct {
	Name, Input, Target, Normalized, Weight, Contribution string
	Known                                                 bool
	Reason                                                string
}

type pidView struct {
	Mode, Setpoint, Measurement, Error string
	Terms                              []pidTerm
	Unlimited, Output                  string
	Saturated                          bool
	From, To, Change                   string
	// Offered explains a proposed ceiling that is not the controller's
	// output (the ceiling did not bind).
	Offered string
}

type pidTerm struct {
	Name, What, Value, Sign string
}

type detectorView struct {
	State, Reason                     string
	Healthy                           string
	BaselineP99, SlowCall, Warn, Crit string
	PeakThroughput                    string
}

type ceilingRow struct {
	Route, ServiceWide, PerInstance, Concurrency string
}

type breakerRow struct {
	Downstream, From, To, Baseline, Why string
}

// signed formats v with an explicit sign and a unit.
func signed(v float64, format, unit string) string {
	s := fmt.Sprintf(format, math.Abs(v))
	switch {
	case v > 0:
		s = "+" + s
	case v < 0:
		s = "−" + s
	}
	if unit != "" {
		s += " " + unit
	}
	return s
}

func signOf(v float64) string {
	switch {
	case v > 0:
		return "raises the ceiling"
	case v < 0:
		return "lowers the ceiling"
	}
	return "no effect"
}

func ptr(v float64) *float64 { return &v }

// buildEvidence turns engine evidence into its view; charts come from the
// window before the proposal (w may be nil) or, where that has no data,
// from the evidence's own readings.
func (p *Pages) buildEvidence(e engineEvidence, charts []model.Chart, chartsErr error) evidenceView {
	v := evidenceView{At: e.At, Effect: e.ExpectedEffect, Confidence: fmt.Sprintf("%.0f %%", 100*e.Confidence),
		Policy: e.Policy, Score: fmt.Sprintf("%.2f", e.LoadScore), Setpoint: fmt.Sprintf("%.2f", e.Setpoint),
		BreakerNote: e.BreakerNote}
	if e.AutoApply != nil {
		v.Verdict = map[bool]string{true: "yes", false: "no"}[*e.AutoApply]
	}
	if b := e.Band; b != nil {
		switch {
		case b.Manual:
			v.Band = "manual: every change waits for approval"
		default:
			v.Band = fmt.Sprintf("at most %.0f %% change per hour", 100*b.MaxChangePerHour)
			if b.Floor > 0 {
				v.Band += ", floor " + fmtRate(ptr(b.Floor))
			}
			if b.Ceiling > 0 {
				v.Band += ", ceiling " + fmtRate(ptr(b.Ceiling))
			}
		}
		switch e.BandSource {
		case "policy":
			v.Band += " (set in the service's policy)"
		case "config":
			v.Band += " (the engine's configured default)"
		}
	}
	if e.HourReference > 0 {
		v.HourReference = fmtRate(ptr(e.HourReference))
	}
	// Confidence: known weight × how long the score has been known, ×0.8
	// while the baselines are inconclusive (engine/recommend).
	var total, known float64
	var knownNames, unknownNames []string
	for _, t := range e.Terms {
		total += t.Weight
		if t.Known {
			known += t.Weight
			knownNames = append(knownNames, t.Term)
		} else {
			unknownNames = append(unknownNames, t.Term)
		}
	}
	if total > 0 {
		s := fmt.Sprintf("%.0f %% of the load score's weight was known", 100*known/total)
		if len(knownNames) > 0 {
			s += " (" + strings.Join(knownNames, ", ") + ")"
		}
		if len(unknownNames) > 0 {
			s += "; unknown: " + strings.Join(unknownNames, ", ")
		}
		v.ConfidenceBasis = append(v.ConfidenceBasis, s)
	}
	v.ConfidenceBasis = append(v.ConfidenceBasis, fmt.Sprintf("%d consecutive known load scores before it", e.KnownScores))
	if e.Detector.Inconclusive {
		v.ConfidenceBasis = append(v.ConfidenceBasis, "the healthy baselines are still inconclusive (confidence × 0.8)")
	} else {
		v.ConfidenceBasis = append(v.ConfidenceBasis, "the healthy baselines are settled")
	}

	// Terms and how they add up to the score.
	var sum float64
	for _, t := range e.Terms {
		r := termRow{Name: t.Term, Known: t.Known, Reason: t.Reason, Weight: fmt.Sprintf("%.2f", t.Weight)}
		if t.Input.Value != nil {
			r.Input = termValue(t.Term, *t.Input.Value)
		} else {
			r.Input = "no data"
		}
		r.Target = termValue(t.Term, t.Target)
		if t.Known {
			r.Normalized = fmt.Sprintf("%.2f", t.Normalized)
			r.Contribution = fmt.Sprintf("%.3f", t.Contribution)
			sum += t.Contribution
		} else {
			r.Normalized, r.Contribution = "—", "—"
		}
		v.Terms = append(v.Terms, r)
	}
	if len(e.Terms) > 0 {
		v.TermSum = fmt.Sprintf("%.3f", sum)
	}

	// The controller, when it moved the ceiling.
	if e.Ceiling.From > 0 && (e.PID.P != 0 || e.PID.I != 0 || e.PID.D != 0 || e.PID.Output != 0) {
		c := e.PID
		pv := &pidView{Mode: c.Mode, Setpoint: fmt.Sprintf("%.2f", c.Setpoint), Measurement: fmt.Sprintf("%.2f", c.Measurement),
			Error: signed(c.Error, "%.3f", ""), Unlimited: fmtRate(ptr(c.Unlimited)), Output: fmtRate(ptr(c.Output)), Saturated: c.Saturated,
			From: fmtRate(ptr(e.Ceiling.From)), To: fmtRate(ptr(e.Ceiling.To))}
		pv.Terms = []pidTerm{
			{"P", "proportional: the gain times the error now", signed(c.P, "%.1f", "req/s"), signOf(c.P)},
			{"I", "integral: the accumulated error, which holds the ceiling", signed(c.I, "%.1f", "req/s"), signOf(c.I)},
			{"D", "derivative: the score's rate of change", signed(c.D, "%.1f", "req/s"), signOf(c.D)},
		}
		d := e.Ceiling.To - e.Ceiling.From
		pv.Change = signed(d, "%.1f", "req/s") + " (" + signed(100*d/e.Ceiling.From, "%.1f", "%") + ")"
		if math.Abs(e.Ceiling.To-c.Output) > 0.05 {
			pv.Offered = fmt.Sprintf("The proposed ceiling is not the controller's output: the ceiling in force did not bind, so the controller's share (%.1f ÷ %.1f) applies to the offered rate, or the ceiling was held.", c.Output, e.Ceiling.From)
		}
		v.PID = pv
	}
	det := e.Detector
	v.Detector = detectorView{State: "conclusive", Reason: det.Reason,
		Healthy:     fmt.Sprintf("%d of %d intervals healthy", det.HealthyIntervals, det.Intervals),
		BaselineP99: secsOrNone(det.BaselineP99), SlowCall: secsOrNone(det.SlowCallThreshold),
		Warn: secsOrNone(det.LatencyWarn), Crit: secsOrNone(det.LatencyCritical), PeakThroughput: "—"}
	if det.PeakThroughput > 0 {
		v.Detector.PeakThroughput = fmtRate(ptr(det.PeakThroughput))
	}
	if det.Inconclusive {
		v.Detector.State = "inconclusive"
	}
	// The ceiling's split.
	routes := make([]string, 0, len(e.Ceiling.Routes))
	for r := range e.Ceiling.Routes {
		routes = append(routes, r)
	}
	for r := range e.Concurrency {
		if _, ok := e.Ceiling.Routes[r]; !ok {
			routes = append(routes, r)
		}
	}
	sort.Strings(routes)
	for _, r := range routes {
		row := ceilingRow{Route: r, ServiceWide: "—", PerInstance: "—", Concurrency: "—"}
		if x, ok := e.Ceiling.Routes[r]; ok {
			row.ServiceWide = fmtRate(ptr(x))
		}
		if x, ok := e.Ceiling.PerInstance[r]; ok {
			row.PerInstance = fmtRate(ptr(x))
		}
		if c, ok := e.Concurrency[r]; ok {
			row.Concurrency = fmt.Sprintf("%d → %d", c[0], c[1])
		}
		v.Ceiling = append(v.Ceiling, row)
	}
	if e.Ceiling.To > 0 {
		v.CeilingSum = fmt.Sprintf("%s → %s over %d instances", fmtRate(ptr(e.Ceiling.From)), fmtRate(ptr(e.Ceiling.To)), e.Ceiling.Instances)
	}
	for _, b := range e.Breakers {
		v.Breakers = append(v.Breakers, breakerRow{Downstream: b.Downstream, From: fmtSecs(ptr(b.From)), To: fmtSecs(ptr(b.To)),
			Baseline: fmt.Sprintf("p99 %s over %d healthy intervals", fmtSecs(ptr(b.BaselineP99)), b.HealthyIntervals), Why: b.Why})
	}
	v.Charts, v.ChartsFrom = evidenceCharts(e, charts, chartsErr)
	return v
}

func secsOrNone(s float64) string {
	if !(s > 0) {
		return "—"
	}
	return fmtSecs(&s)
}

// termValue formats a load score term's input or target in its unit.
func termValue(term string, v float64) string {
	switch term {
	case "latency", "queue":
		return fmtSecs(&v)
	case "memory":
		return fmt.Sprintf("%.0f MiB", v/(1<<20))
	case "cpu":
		return fmt.Sprintf("%.2f cores", v)
	case "inflight":
		return fmt.Sprintf("%.0f req", v)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// evidenceSignals are the charts of a recommendation, in page order.
var evidenceSignals = []string{model.SignalLoadScore, model.SignalRequestRate, model.SignalLatencyP99, model.SignalErrorRatio}

// evidenceCharts draws the window before the proposal from charts (the
// metrics source's answer, in evidenceSignals order), and, for a signal the
// source has no data for, the evidence's own reading as a single point.
func evidenceCharts(e engineEvidence, charts []model.Chart, chartsErr error) ([]evidenceChart, string) {
	reading := func(name string, scale float64) *float64 {
		if name == model.SignalLoadScore {
			return ptr(e.LoadScore)
		}
		if v := e.Signals[name]; v != nil {
			return ptr(*v * scale)
		}
		return nil
	}
	var latencyTarget float64
	for _, t := range e.Terms {
		if t.Term == "latency" {
			latencyTarget = t.Target * 1000
		}
	}
	specs := []struct {
		name, title, unit string
		scale             float64
		o                 ChartOptions
	}{
		{model.SignalLoadScore, "Load score", "", 1, ChartOptions{Min: 0, Max: 1, Act: actAbove, Release: releaseBelow, Setpoint: e.Setpoint}},
		{model.SignalRequestRate, "Request rate", "req/s", 1, ChartOptions{}},
		{model.SignalLatencyP99, "p99 latency", "ms", 1000, ChartOptions{Target: latencyTarget}},
		{model.SignalErrorRatio, "Error ratio", "%", 100, ChartOptions{Min: 0, Max: 100}},
	}
	fromSource, fromEvidence := 0, 0
	out := make([]evidenceChart, 0, len(specs))
	for i, sp := range specs {
		o := sp.o
		o.Unit, o.Label = sp.unit, sp.title+" before the proposal"
		r := reading(sp.name, sp.scale)
		if i < len(charts) {
			// A failed or partial read of the metrics source is said on
			// the chart, also over the evidence's own reading.
			o.Failed, o.Partial = charts[i].Failed, charts[i].Partial
		}
		if i < len(charts) && len(charts[i].Points) > 0 {
			o.Points = charts[i].Points
			fromSource++
		} else if r != nil {
			o.Points = []model.Point{{At: e.At, Value: *r}}
			fromEvidence++
		} else {
			o.NoData = "the evidence has no reading of it"
			if i < len(charts) && charts[i].NoData != "" && charts[i].NoData != charts[i].Failed {
				o.NoData = charts[i].NoData + "; " + o.NoData
			}
		}
		c := evidenceChart{Title: sp.title, Unit: sp.unit, SVG: Chart(o)}
		if r != nil {
			c.AtProposal = fmtValue(*r, sp.unit)
		}
		out = append(out, c)
	}
	var from string
	switch {
	case fromEvidence == 0 && fromSource > 0:
		from = fmt.Sprintf("The metrics source, over the %s before the proposal.", fmtDuration(evidenceWindow))
	case fromSource == 0 && charts == nil && chartsErr == nil:
		from = "The evidence's own readings at the proposal (no metrics source that draws past windows is configured)."
	case fromSource == 0:
		from = "The evidence's own readings at the proposal: the metrics source has no data for the window before it."
	default:
		from = fmt.Sprintf("The metrics source over the %s before the proposal; single points are the evidence's own readings where the source has no data.", fmtDuration(evidenceWindow))
	}
	return out, from
}

func fmtDuration(d time.Duration) string {
	if d%time.Hour == 0 {
		return strconv.Itoa(int(d/time.Hour)) + " h"
	}
	return strconv.Itoa(int(d/time.Minute)) + " minutes"
}

// changeRow is one changed ruleset field, readable.
type changeRow struct {
	Path, Op, Before, After, Delta string
}

// changeRows renders a diff: values unquoted, numbers with their
// difference.
func changeRows(cs []versioning.Change) []changeRow {
	out := make([]changeRow, 0, len(cs))
	for _, c := range cs {
		r := changeRow{Path: c.Path, Op: string(c.Op), Before: rawValue(c.Old), After: rawValue(c.New)}
		var a, b float64
		if json.Unmarshal(c.Old, &a) == nil && json.Unmarshal(c.New, &b) == nil && a != b {
			r.Delta = signed(b-a, "%.6g", "")
			if a != 0 {
				r.Delta += " (" + signed(100*(b-a)/math.Abs(a), "%.1f", "%") + ")"
			}
		}
		out = append(out, r)
	}
	return out
}

func rawValue(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) == nil {
		return buf.String()
	}
	return string(raw)
}

// prettyJSON indents raw JSON for the collapsed raw evidence.
func prettyJSON(raw json.RawMessage) string {
	var buf bytes.Buffer
	if json.Indent(&buf, raw, "", "  ") != nil {
		return string(raw)
	}
	return buf.String()
}
