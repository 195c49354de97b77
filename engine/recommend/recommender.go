package recommend

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"sync"
	"time"

	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/pid"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/thresholds"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/rules"
)

// Input is what the recommender sees of one service at one evaluation.
type Input struct {
	At      time.Time
	Service string
	// Score is the service's smoothed load score.
	Score loadscore.Score
	// Entry holds the service-level signals; nil when none were read.
	Entry *signals.Entry
	// Active is the service's live version; nil when it has none.
	Active *versioning.Version
	// Instances is the live instance count from the delivery ledger.
	Instances int
	// Band bounds the controller's output (floor and ceiling).
	Band Band
}

// Recommendation is the outcome of one evaluation of one service. Ruleset
// is nil when nothing is proposed; Reason says why (or summarises the
// change), Inconclusive marks missing data rather than a settled state.
type Recommendation struct {
	Service      string         `json:"service"`
	At           time.Time      `json:"at"`
	Inconclusive bool           `json:"inconclusive"`
	Reason       string         `json:"reason"`
	Ruleset      *rules.Ruleset `json:"ruleset,omitempty"`
	// Base is the active version the proposal is based on.
	Base     int64     `json:"base"`
	Evidence *Evidence `json:"evidence,omitempty"`
	// ceilingOnly is this recommendation without its breaker changes, set
	// when it also moves or re-splits the ceiling.
	ceilingOnly *Recommendation
}

// Recommender keeps one controller and one baseline learner per service.
// It is safe for concurrent use; services are independent.
type Recommender struct {
	o  Options
	mu sync.Mutex
	s  map[string]*state
}

type state struct {
	mu      sync.Mutex
	ctl     *pid.Controller
	version int64   // active version the controller tracks
	base    float64 // ceiling the controller started from
	known   int     // consecutive known scores
	thr     *thresholds.Recommender
}

// New validates the options and returns a Recommender.
func New(o Options) (*Recommender, error) {
	if err := o.fill(); err != nil {
		return nil, err
	}
	if _, err := thresholds.NewRecommender(o.Thresholds); err != nil {
		return nil, fmt.Errorf("%w: Thresholds: %w", ErrInvalidOption, err)
	}
	return &Recommender{o: o, s: map[string]*state{}}, nil
}

// Options returns the effective options.
func (r *Recommender) Options() Options { return r.o }

func (r *Recommender) state(service string) *state {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.s[service]
	if st == nil {
		st = r.newState()
		r.s[service] = st
	}
	return st
}

// newState is the state of a service not seen before.
func (r *Recommender) newState() *state {
	thr, _ := thresholds.NewRecommender(r.o.Thresholds) // validated in New
	return &state{thr: thr}
}

// Forget drops the state of a service that is gone.
func (r *Recommender) Forget(service string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.s, service)
}

// Evaluate runs one evaluation of one service.
func (r *Recommender) Evaluate(in Input) Recommendation {
	st := r.state(in.Service)
	st.mu.Lock()
	defer st.mu.Unlock()
	rec := Recommendation{Service: in.Service, At: in.At}
	none := func(inconclusive bool, format string, args ...any) Recommendation {
		rec.Inconclusive, rec.Reason = inconclusive, fmt.Sprintf(format, args...)
		return rec
	}
	det := st.observe(in)

	if !in.Score.Known || !in.Score.Raw.Known || math.IsNaN(in.Score.Value) {
		st.known = 0
		why := in.Score.Raw.Reason
		if why == "" {
			why = "no known score"
		}
		return none(true, "load score unknown: %s", why)
	}
	st.known++
	if in.Active == nil || in.Active.Ruleset == nil {
		return none(true, "the service has no active version to base a change on")
	}
	if in.Instances < 1 {
		return none(true, "no live instance in the delivery ledger")
	}
	brk, note := planBreakers(in.Active.Ruleset, det, &r.o)
	cur, ok := currentCeiling(in.Active, in.Instances)
	if !ok {
		if len(brk) == 0 {
			return none(false, "no rate-limited route to govern; %s", note)
		}
		if st.known < r.o.MinScores {
			return none(true, "%d of %d consecutive known load scores", st.known, r.o.MinScores)
		}
		return r.propose(rec, in, st, det, brk, note, nil)
	}
	if st.ctl == nil || st.version != in.Active.Number {
		if err := st.track(&r.o, in, cur.To); err != nil {
			return none(true, "controller: %v", err)
		}
	}
	if err := st.bound(in.Band); err != nil {
		return none(true, "controller: %v", err)
	}
	if err := st.integrate(&r.o, !r.answered(st.ctl.Output(), cur.To, in)); err != nil {
		return none(true, "controller: %v", err)
	}
	out, err := st.ctl.Update(in.At, r.o.Setpoint, in.Score.Value)
	if err != nil {
		return none(true, "controller: %v", err)
	}
	out = in.Band.clamp(out) // a pinned band's limits are a step apart
	if st.known < r.o.MinScores {
		return none(true, "%d of %d consecutive known load scores", st.known, r.o.MinScores)
	}
	if in.Entry == nil {
		return none(true, "no service signals")
	}
	rate, ok := in.Entry.Get(signals.RequestRate).Get()
	if !ok {
		return none(true, "request rate unknown")
	}
	resplit := cur.Instances != in.Instances
	hold := resplit || len(brk) > 0 // something to propose with the ceiling held
	to := out
	if rate < r.o.Binding*cur.To {
		var idle string // why moving the ceiling would change nothing, if it would not
		if out < cur.To && in.Score.Value > r.o.Setpoint {
			// Overloaded below a ceiling nobody reaches: cutting the
			// ceiling would change nothing, so cut the offered rate by
			// the controller's share instead, inside the band: the
			// controller's own output is, this rescaled one is not.
			lo, hi := in.Band.bounds(st.base)
			if to = in.Band.clamp(min(max(rate*out/cur.To, lo), hi)); to >= rate {
				idle = fmt.Sprintf("overloaded below a ceiling nobody reaches (offered %.1f req/s), and the band's floor %.1f req/s keeps any cut above the offered rate", rate, lo)
			}
		} else {
			idle = fmt.Sprintf("ceiling %.1f req/s is not binding (offered %.1f req/s)", cur.To, rate)
		}
		if idle != "" {
			// Hold the controller at the ceiling in force so it does not
			// wind up.
			_ = st.track(&r.o, in, cur.To)
			if !hold {
				return none(false, "%s; %s", idle, note)
			}
			to = cur.To
		}
	}
	if math.Abs(to/cur.To-1) < r.o.MinChange {
		if !hold {
			return none(false, "change of %.1f%% is below the minimum of %.1f%%; %s", 100*math.Abs(to/cur.To-1), 100*r.o.MinChange, note)
		}
		to = cur.To
	}
	return r.propose(rec, in, st, det, brk, note, &ceilingChange{cur: cur, to: to, rate: rate, resplit: resplit})
}

// ceilingChange is the ceiling part of a proposal.
type ceilingChange struct {
	cur     Ceiling
	to      float64
	rate    float64
	resplit bool
}

// propose builds the proposed ruleset and its evidence from the active
// version: the ceiling change c (nil: the service has no rate-limited
// route) and the breaker changes brk (note says why there are none).
func (r *Recommender) propose(rec Recommendation, in Input, st *state, det Detector, brk []BreakerChange, note string, c *ceilingChange) Recommendation {
	ev := &Evidence{
		At: in.At, Setpoint: r.o.Setpoint, LoadScore: in.Score.Value, Terms: in.Score.Raw.Terms,
		Signals: map[signals.Signal]*float64{}, Detector: det, KnownScores: st.known, Breakers: brk, BreakerNote: note,
	}
	var rs *rules.Ruleset
	if c != nil {
		rs, ev.Ceiling, ev.Concurrency = apply(in.Active.Ruleset, c.cur, c.to, in.Instances)
		ev.PID = st.ctl.State()
		effect(ev, c.cur.To, c.to, c.rate, c.resplit, c.cur.Instances)
	} else {
		rs = in.Active.Ruleset.Clone()
		ev.ExpectedScore = ev.LoadScore
	}
	for _, s := range signals.All {
		if in.Entry != nil {
			ev.Signals[s] = num(in.Entry.Get(s))
		} else {
			ev.Signals[s] = nil
		}
	}
	ev.Confidence = confidence(in.Score.Raw.KnownWeight, st.known, r.o.MinScores, det.Inconclusive)
	rec.Base = in.Active.Number
	if len(brk) > 0 && c != nil && (c.to != c.cur.To || c.resplit) {
		// The ceiling move alone, for the proposer to apply at once when
		// the band allows it (a breaker change always waits).
		alt := *ev
		alt.Breakers = nil
		alt.BreakerNote = "breaker changes held back for a later proposal: this ceiling move applies itself, they wait for approval"
		only := rec
		only.Ruleset, only.Evidence, only.Reason = rs.Clone(), &alt, alt.ExpectedEffect
		rec.ceilingOnly = &only
	}
	applyBreakers(rs, brk)
	if len(brk) > 0 {
		if ev.ExpectedEffect == "" {
			ev.ExpectedEffect = breakerSummary(brk)
		} else {
			ev.ExpectedEffect += "; " + breakerSummary(brk)
		}
	}
	rec.Ruleset, rec.Evidence, rec.Reason = rs, ev, ev.ExpectedEffect
	return rec
}

// observe feeds the baselines and returns the detector's state.
func (st *state) observe(in Input) Detector {
	if in.Entry != nil {
		rate, ok1 := in.Entry.Get(signals.RequestRate).Get()
		er, ok2 := in.Entry.Get(signals.ErrorRatio).Get()
		p50, ok3 := in.Entry.Get(signals.LatencyP50).Get()
		p99, ok4 := in.Entry.Get(signals.LatencyP99).Get()
		if ok1 && ok2 && ok3 && ok4 {
			st.thr.Observe(thresholds.Interval{Time: in.At, Throughput: rate, ErrorRatio: er, LatencyP50: p50, LatencyP99: p99})
		}
	}
	t := st.thr.Recommend()
	return Detector{Inconclusive: t.Inconclusive, Reason: t.Reason, HealthyIntervals: t.HealthyIntervals,
		Intervals: t.Intervals, BaselineP99: t.BaselineP99, SlowCallThreshold: t.SlowCallThreshold,
		LatencyWarn: t.LatencyWarn, LatencyCritical: t.LatencyCritical, PeakThroughput: t.PeakThroughput}
}

// answered reports whether the controller's output out, a change worth
// proposing that is not in force (waiting for approval, or rejected), already
// answers the error: by the evidence's own estimate (the load score scaled
// by the rate the new ceiling would serve, see effect) it brings the score
// to the setpoint or past it. The ceiling did not follow the output, so the
// load cannot answer; integrating on would wind the proposal down to the
// band's floor (or up to its ceiling) within minutes. The integral holds
// until the ceiling follows (a new version restarts the controller) or the
// load moves. With the offered rate unknown it holds too.
func (r *Recommender) answered(out, cur float64, in Input) bool {
	if math.Abs(out/cur-1) < r.o.MinChange {
		return false
	}
	if in.Entry == nil {
		return true
	}
	rate, ok := in.Entry.Get(signals.RequestRate).Get()
	if !ok || !(rate > 0) {
		return true
	}
	expected := in.Score.Value * min(rate, out) / min(rate, cur)
	if out < cur {
		return expected <= r.o.Setpoint
	}
	return expected >= r.o.Setpoint
}

// integrate turns the controller's integral action on or off (bumpless:
// the integral term keeps its value while Ki is 0). A controller without
// proportional or derivative gain keeps integrating: it has nothing else.
func (st *state) integrate(o *Options, on bool) error {
	cfg := st.ctl.Config()
	ki := 0.0
	if on {
		ki = o.Gains.Ki * st.base
	}
	if cfg.Ki == ki || (cfg.Kp == 0 && cfg.Kd == 0) {
		return nil
	}
	cfg.Ki, cfg.AntiWindup = ki, pid.BackCalculation
	if ki == 0 {
		cfg.AntiWindup = pid.Conditional
	}
	return st.ctl.SetConfig(cfg)
}

// bound keeps the controller's output within the band in force: a floor or
// ceiling a person sets or clears while the controller tracks a version
// takes effect at once (the output moves inside a narrower band at the next
// update), not only when a new version restarts the controller.
func (st *state) bound(b Band) error {
	cfg := st.ctl.Config()
	lo, hi := b.bounds(st.base)
	if cfg.OutMin == lo && cfg.OutMax == hi {
		return nil
	}
	cfg.OutMin, cfg.OutMax = lo, hi
	return st.ctl.SetConfig(cfg)
}

// track (re)starts the controller at ceiling c0: bumpless, from c0.
func (st *state) track(o *Options, in Input, c0 float64) error {
	lo, hi := in.Band.bounds(c0)
	cfg := o.pidConfig(c0, lo, hi)
	if cfg.Ki == 0 {
		cfg.AntiWindup = pid.Conditional
	}
	ctl, err := pid.New(cfg)
	if err != nil {
		return err
	}
	if err := ctl.SetManual(c0); err != nil {
		return err
	}
	if _, err := ctl.Update(in.At.Add(-time.Nanosecond), o.Setpoint, in.Score.Value); err != nil {
		return err
	}
	ctl.SetAuto()
	st.ctl, st.version, st.base = ctl, in.Active.Number, c0
	return nil
}

// currentCeiling is the service-wide ceiling in force: from the active
// version's evidence when the engine wrote it for the same routes,
// otherwise the per-instance rates times the live instances.
func currentCeiling(v *versioning.Version, instances int) (Ceiling, bool) {
	per := map[string]float64{}
	for _, rt := range v.Ruleset.Routes {
		if rt.RateLimit != nil && rt.RateLimit.Rate > 0 {
			per[rt.Name] = rt.RateLimit.Rate
		}
	}
	if len(per) == 0 {
		return Ceiling{}, false
	}
	if c, ok := ceilingOf(v.Evidence); ok && sameKeys(c.Routes, per) && c.Instances > 0 {
		c.From = c.To
		return c, true
	}
	c := Ceiling{Instances: instances, Routes: map[string]float64{}, PerInstance: per}
	for name, r := range per {
		c.Routes[name] = r * float64(instances)
		c.To += r * float64(instances)
	}
	c.From = c.To
	return c, true
}

func sameKeys(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

// apply scales the rate-limited routes from ceiling cur to `to`, split over
// n instances, and their concurrency upper bounds by the same ratio.
func apply(active *rules.Ruleset, cur Ceiling, to float64, n int) (*rules.Ruleset, Ceiling, map[string][2]int) {
	rs := active.Clone()
	ratio := to / cur.To
	ceil := Ceiling{From: cur.To, To: to, Instances: n, Routes: map[string]float64{}, PerInstance: map[string]float64{}}
	conc := map[string][2]int{}
	for i := range rs.Routes {
		rt := &rs.Routes[i]
		svc, ok := cur.Routes[rt.Name]
		if !ok || rt.RateLimit == nil {
			continue
		}
		svc *= ratio
		per := perInstance(svc, n)
		ceil.Routes[rt.Name] = svc
		ceil.PerInstance[rt.Name] = per
		rt.RateLimit.Rate = per
		if c := rt.Concurrency; c != nil && c.Max > 0 && ratio != 1 {
			from := c.Max
			c.Max = max(int(math.Round(float64(c.Max)*ratio)), c.Min, 1)
			if c.Initial > c.Max {
				c.Initial = c.Max
			}
			conc[rt.Name] = [2]int{from, c.Max}
		}
	}
	if len(conc) == 0 {
		conc = nil
	}
	return rs, ceil, conc
}

// perInstance is a service-wide rate split over n instances, rounded to
// one decimal or to three significant digits, whichever is finer, so
// that the instances together enforce the service-wide rate within 0.5%
// however many there are (a fixed 0.1 req/s step would double a 50 req/s
// route over 1000 instances, or cut one over 250 by a sixth).
func perInstance(svc float64, n int) float64 {
	x := svc / float64(n)
	if !(x > 0) || x >= 100 {
		return math.Round(x*10) / 10
	}
	q := math.Pow(10, 2-math.Floor(math.Log10(x))) // below 100: at least 10
	return math.Round(x*q) / q
}

// rateText renders a per-instance rate: one decimal when that is exact,
// else every digit it has.
func rateText(v float64) string {
	if math.Round(v*10) == v*10 {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// effect fills the expected effect of moving the ceiling from cur to `to` at
// offered rate `rate`.
func effect(ev *Evidence, cur, to, rate float64, resplit bool, wasInstances int) {
	if rate > 0 {
		ev.ExpectedShedRatio = math.Max(0, 1-to/rate)
	}
	served := func(c float64) float64 { return math.Min(rate, c) }
	ev.ExpectedScore = ev.LoadScore
	if s := served(cur); s > 0 {
		ev.ExpectedScore = math.Min(1, ev.LoadScore*served(to)/s)
	}
	names := make([]string, 0, len(ev.Ceiling.PerInstance))
	for n := range ev.Ceiling.PerInstance {
		names = append(names, n)
	}
	sort.Strings(names)
	split := ""
	for _, n := range names {
		split += fmt.Sprintf(" %s %s/s each", n, rateText(ev.Ceiling.PerInstance[n]))
	}
	verb := "lower"
	if to > cur {
		verb = "raise"
	}
	switch {
	case to == cur && !resplit:
		ev.ExpectedEffect = fmt.Sprintf("keep the ceiling at %.1f req/s over %d instances", to, ev.Ceiling.Instances)
	case to == cur && resplit:
		ev.ExpectedEffect = fmt.Sprintf("re-split the %.1f req/s ceiling over %d live instances (was %d):%s", to, ev.Ceiling.Instances, wasInstances, split)
	default:
		ev.ExpectedEffect = fmt.Sprintf("%s the ceiling from %.1f to %.1f req/s over %d instances (%s); about %.1f%% of the current %.1f req/s would be refused; load score %.2f expected near %.2f (setpoint %.2f)",
			verb, cur, to, ev.Ceiling.Instances, trim(split), 100*ev.ExpectedShedRatio, rate, ev.LoadScore, ev.ExpectedScore, ev.Setpoint)
	}
}

func trim(s string) string {
	if len(s) > 0 && s[0] == ' ' {
		return s[1:]
	}
	return s
}

// confidence combines how much of the score was known, how long it has
// been known and whether the baselines are settled.
func confidence(knownWeight float64, known, minScores int, detInconclusive bool) float64 {
	c := knownWeight * math.Min(1, float64(known)/float64(2*minScores))
	if detInconclusive {
		c *= 0.8
	}
	return math.Round(c*100) / 100
}
