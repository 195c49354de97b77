package rule

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"governor.dev/governor/alerts"
)

// Sample is one series of a query result.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// QueryFunc evaluates an instant PromQL query at t. The engine's metrics
// source is adapted to it; tests pass a function.
type QueryFunc func(ctx context.Context, q string, t time.Time) ([]Sample, error)

// Active is the state of one alert of a rule; it is what the store persists
// so that a restart keeps pending and firing alerts where they were.
type Active struct {
	Rule        string            `json:"rule"`
	Labels      alerts.Labels     `json:"labels"`
	Annotations map[string]string `json:"annotations,omitempty"`
	State       alerts.State      `json:"state"`
	Value       float64           `json:"value"`
	// ActiveAt is when the condition started holding.
	ActiveAt time.Time `json:"active_at"`
	// FiredAt is when the alert went firing (zero while pending).
	FiredAt time.Time `json:"fired_at,omitzero"`
	// ResolvedAt is when a firing alert stopped (zero while firing).
	ResolvedAt time.Time `json:"resolved_at,omitzero"`
	// KeepFiringSince is when the condition stopped while KeepFiringFor
	// holds the alert firing.
	KeepFiringSince time.Time `json:"keep_firing_since,omitzero"`
	// LastEventAt is the last event of an event rule.
	LastEventAt time.Time `json:"last_event_at,omitzero"`
}

// Fingerprint identifies the alert.
func (a *Active) Fingerprint() alerts.Fingerprint { return a.Labels.Fingerprint() }

// Alert renders the alert for the dispatcher: firing from FiredAt, resolved
// at ResolvedAt.
func (a *Active) Alert() alerts.Alert { return a.alert(generatorURL(a.Rule)) }

// alert is Alert with the rule's generator URL built once per rule.
func (a *Active) alert(url string) alerts.Alert {
	return alerts.Alert{Labels: a.Labels, Annotations: a.Annotations, StartsAt: a.FiredAt, EndsAt: a.ResolvedAt,
		GeneratorURL: url}
}

func generatorURL(rule string) string { return "governor://alerts/rules/" + rule }

// Transition is one state change, for the history.
type Transition struct {
	Rule        string
	Fingerprint alerts.Fingerprint
	Labels      alerts.Labels
	From, To    alerts.State
	At          time.Time
}

// ResolvedRetention is how long a resolved alert is still reported so that
// its resolve notification goes out.
const ResolvedRetention = 15 * time.Minute

// Evaluator holds a rule set and the state of its alerts. It is safe for
// concurrent use.
type Evaluator struct {
	mu    sync.Mutex
	rules []Rule
	// active holds the alerts by rule name, then by the fingerprint of
	// their labels. An alert's labels are set when it is created (from a
	// map built for it, or cloned by Restore) and never changed, so the
	// key stays its fingerprint: sorting and counting use the key and
	// never hash the labels again.
	active map[string]map[alerts.Fingerprint]*Active
	events map[string][]Event // pending events by rule name
	// cleared holds, by rule name, when each subject of an event rule was
	// last cleared (observeEvents).
	cleared map[string]map[alerts.Fingerprint]time.Time
	// gen counts the Updates, so that an Eval whose query ran while the
	// rule set changed can tell that the rule it holds may be outdated.
	gen uint64
	// dropped is set when an Update dropped alert states, so that the next
	// Eval reports Changed and the store forgets them too.
	dropped bool
}

// NewEvaluator validates rules and returns an evaluator.
func NewEvaluator(rules []Rule) (*Evaluator, error) {
	e := &Evaluator{active: map[string]map[alerts.Fingerprint]*Active{}, events: map[string][]Event{},
		cleared: map[string]map[alerts.Fingerprint]time.Time{}}
	if err := e.Update(rules); err != nil {
		return nil, err
	}
	return e, nil
}

// Rules returns a copy of the rule set.
func (e *Evaluator) Rules() []Rule {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.rules)
}

// Update replaces the rule set. The whole set is validated first; on error
// the old set stays. Alerts and queued events of rules whose definition did
// not change, or only in its annotations, are kept; the others start over,
// and the next Eval reports Changed when alerts were dropped. An Eval
// running meanwhile does not apply a rule that is no longer in force.
func (e *Evaluator) Update(rules []Rule) error {
	if err := ValidateSet(rules); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	old := map[string]Rule{}
	for _, r := range e.rules {
		old[r.Name] = r
	}
	active := map[string]map[alerts.Fingerprint]*Active{}
	events := map[string][]Event{}
	cleared := map[string]map[alerts.Fingerprint]time.Time{}
	for _, r := range rules {
		if o, ok := old[r.Name]; ok && sameCondition(o, r) {
			if a := e.active[r.Name]; a != nil {
				active[r.Name] = a
			}
			// Events were queued for the old definition (its event kind):
			// a changed rule must not be raised by them.
			if evs := e.events[r.Name]; evs != nil {
				events[r.Name] = evs
			}
			if c := e.cleared[r.Name]; c != nil {
				cleared[r.Name] = c
			}
		}
	}
	for name, m := range e.active {
		if _, kept := active[name]; !kept && len(m) > 0 {
			e.dropped = true
		}
	}
	e.active = active
	e.events = events
	e.cleared = cleared
	e.rules = slices.Clone(rules)
	e.gen++
	return nil
}

// inForce reports whether r is the rule of its name in the set. Callers
// hold e.mu.
func (e *Evaluator) inForce(r Rule) bool {
	return slices.ContainsFunc(e.rules, func(c Rule) bool { return c.Name == r.Name && equalRules(c, r) })
}

func equalRules(a, b Rule) bool {
	return sameCondition(a, b) && maps.Equal(a.Annotations, b.Annotations)
}

// sameCondition reports whether a and b raise the same alerts at the same
// times: they differ at most in their annotations. An Update keeps the
// alerts of such a rule, whose annotations the next Eval renders anew, as
// Prometheus keeps them: fixing a runbook link must not resolve every
// alert of the rule and page again once it has held for For.
func sameCondition(a, b Rule) bool {
	return a.Expr == b.Expr && a.Event == b.Event && a.Severity == b.Severity && a.For == b.For &&
		a.KeepFiringFor == b.KeepFiringFor && a.ResolveAfter == b.ResolveAfter && a.Disabled == b.Disabled &&
		maps.Equal(a.Labels, b.Labels)
}

// Restore replaces the alert states with persisted ones (after a
// restart, or when a replica takes the lead): an alert held in memory that
// states lack (one the last leader resolved and dropped) is forgotten, not
// resolved once more. States of rules not in the set, or disabled, are
// dropped, as Update drops them: Eval never evaluates a disabled rule, so
// an alert restored for one would fire for good.
func (e *Evaluator) Restore(states []Active) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.active = map[string]map[alerts.Fingerprint]*Active{}
	known := map[string]bool{}
	for _, r := range e.rules {
		known[r.Name] = !r.Disabled
	}
	for _, s := range states {
		if !known[s.Rule] {
			continue
		}
		m := e.active[s.Rule]
		if m == nil {
			m = map[alerts.Fingerprint]*Active{}
			e.active[s.Rule] = m
		}
		c := s
		// The key must stay the fingerprint of the labels: the caller
		// keeps its map.
		c.Labels = maps.Clone(s.Labels)
		m[c.Fingerprint()] = &c
	}
}

// States returns a copy of every alert state, sorted by rule name, then by
// fingerprint. The copies share their label and annotation maps with the
// evaluator: callers must not change them.
func (e *Evaluator) States() []Active {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, m := range e.active {
		n += len(m)
	}
	if n == 0 {
		return nil
	}
	out := make([]Active, 0, n)
	var fps []alerts.Fingerprint
	for _, name := range slices.Sorted(maps.Keys(e.active)) {
		m := e.active[name]
		fps = slices.AppendSeq(fps[:0], maps.Keys(m))
		slices.Sort(fps)
		for _, fp := range fps {
			out = append(out, *m[fp])
		}
	}
	return out
}

// StateKey is a state and a severity label, by which Counts groups alerts.
type StateKey struct {
	State    alerts.State
	Severity alerts.Severity
}

// Counts returns the number of alerts States would list, by state and
// severity label, without copying or sorting them: what the metrics need
// at every evaluation.
func (e *Evaluator) Counts() map[StateKey]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[StateKey]int{}
	for _, m := range e.active {
		for _, a := range m {
			out[StateKey{State: a.State, Severity: alerts.Severity(a.Labels[alerts.SeverityLabel])}]++
		}
	}
	return out
}

// Result is the outcome of one evaluation.
type Result struct {
	// Alerts are the firing alerts and those resolved within
	// ResolvedRetention, for the dispatcher.
	Alerts []alerts.Alert
	// Transitions are the state changes of this evaluation.
	Transitions []Transition
	// Errors are the rules whose query failed; their alerts keep their
	// state until the next evaluation.
	Errors []error
	// Changed reports whether a state worth persisting changed: a
	// transition, a keep-firing or event time, an alert dropped (also by an
	// Update since the last Eval). Values and annotations alone do not
	// count.
	Changed bool
}

// Eval evaluates every enabled rule at t. Queries run outside the lock; a
// rule that an Update changed or removed meanwhile is skipped, as its
// alerts now belong to the new definition, which the next Eval evaluates.
func (e *Evaluator) Eval(ctx context.Context, t time.Time, query QueryFunc) Result {
	e.mu.Lock()
	rules := slices.Clone(e.rules)
	gen := e.gen
	e.mu.Unlock()
	var res Result
	for _, r := range rules {
		if r.Disabled {
			continue
		}
		var seen map[alerts.Fingerprint]observation
		if r.Expr != "" {
			if query == nil {
				res.Errors = append(res.Errors, fmt.Errorf("%w: rule %q: no query function", alerts.ErrInvalid, r.Name))
				continue
			}
			samples, err := query(ctx, r.Expr, t)
			if err != nil {
				res.Errors = append(res.Errors, fmt.Errorf("rule %q: query: %w", r.Name, err))
				continue
			}
			seen = r.observeSamples(samples)
		}
		e.mu.Lock()
		if e.gen != gen && !e.inForce(r) {
			e.mu.Unlock()
			continue
		}
		if r.Event != "" {
			c := e.cleared[r.Name]
			if c == nil {
				c = map[alerts.Fingerprint]time.Time{}
				e.cleared[r.Name] = c
			}
			seen = r.observeEvents(e.active[r.Name], e.events[r.Name], t, c)
			delete(e.events, r.Name)
		}
		tr, changed := e.step(r, seen, t)
		res.Transitions = append(res.Transitions, tr...)
		res.Changed = res.Changed || changed
		e.mu.Unlock()
	}
	e.mu.Lock()
	res.Changed = res.Changed || e.dropped
	e.dropped = false
	var fps []alerts.Fingerprint
	for name, m := range e.active {
		url := generatorURL(name)
		for fp, a := range m {
			if a.State == alerts.StateFiring || (!a.ResolvedAt.IsZero() && !a.FiredAt.IsZero()) {
				res.Alerts = append(res.Alerts, a.alert(url))
				fps = append(fps, fp)
			}
		}
	}
	e.mu.Unlock()
	sort.Sort(byFingerprint{fps: fps, alerts: res.Alerts})
	return res
}

// byFingerprint sorts alerts by their fingerprints, computed once. The
// fingerprints are distinct (one alert per label set), so the order is the
// same whatever the sort algorithm.
type byFingerprint struct {
	fps    []alerts.Fingerprint
	alerts []alerts.Alert
}

func (s byFingerprint) Len() int           { return len(s.fps) }
func (s byFingerprint) Less(i, j int) bool { return s.fps[i] < s.fps[j] }
func (s byFingerprint) Swap(i, j int) {
	s.fps[i], s.fps[j] = s.fps[j], s.fps[i]
	s.alerts[i], s.alerts[j] = s.alerts[j], s.alerts[i]
}

// observation is one alert instance whose condition holds now.
type observation struct {
	labels  alerts.Labels
	value   float64
	eventAt time.Time
}

// alertLabels returns the labels of an alert of the rule: the series' or
// event's labels, the rule's over them, its name and tier. As in
// Prometheus, a label with an empty value is no label: an empty value in
// base is left out, and a rule label set to "" removes the label.
func (r Rule) alertLabels(base map[string]string, sev alerts.Severity) alerts.Labels {
	l := alerts.Labels{}
	for k, v := range base {
		if k != "__name__" && v != "" {
			l[k] = v
		}
	}
	for k, v := range r.Labels {
		if v == "" {
			delete(l, k)
		} else {
			l[k] = v
		}
	}
	l[AlertNameLabel] = r.Name
	if sev == "" {
		sev = r.Severity
	}
	if sev == "" {
		sev = alerts.P2
	}
	l[alerts.SeverityLabel] = string(sev)
	return l
}

func (r Rule) observeSamples(samples []Sample) map[alerts.Fingerprint]observation {
	out := make(map[alerts.Fingerprint]observation, len(samples))
	for _, s := range samples {
		l := r.alertLabels(s.Labels, "")
		out[l.Fingerprint()] = observation{labels: l, value: s.Value}
	}
	return out
}

// step applies one evaluation's observations to the rule's alerts. Callers
// hold e.mu.
func (e *Evaluator) step(r Rule, seen map[alerts.Fingerprint]observation, t time.Time) (_ []Transition, changed bool) {
	m := e.active[r.Name]
	if m == nil {
		m = map[alerts.Fingerprint]*Active{}
		e.active[r.Name] = m
	}
	var tr []Transition
	move := func(a *Active, fp alerts.Fingerprint, to alerts.State) {
		tr = append(tr, Transition{Rule: r.Name, Fingerprint: fp, Labels: a.Labels, From: a.State, To: to, At: t})
		a.State = to
	}
	for fp, o := range seen {
		a, ok := m[fp]
		if !ok || a.State == alerts.StateInactive {
			a = &Active{Rule: r.Name, Labels: o.labels, ActiveAt: t}
			m[fp] = a
			move(a, fp, alerts.StatePending)
		}
		a.Value = o.value
		if !a.KeepFiringSince.IsZero() {
			a.KeepFiringSince = time.Time{}
			changed = true
		}
		if !o.eventAt.IsZero() && !o.eventAt.Equal(a.LastEventAt) {
			a.LastEventAt = o.eventAt
			changed = true
		}
		a.Annotations = expand(r.Annotations, a.Labels, a.Value)
	}
	for fp, a := range m {
		if _, ok := seen[fp]; ok {
			continue
		}
		switch a.State {
		case alerts.StatePending:
			move(a, fp, alerts.StateInactive)
			delete(m, fp)
		case alerts.StateFiring:
			if r.KeepFiringFor > 0 {
				if a.KeepFiringSince.IsZero() {
					a.KeepFiringSince = t
					changed = true
				}
				if t.Sub(a.KeepFiringSince) < r.KeepFiringFor {
					continue
				}
			}
			a.ResolvedAt = t
			a.KeepFiringSince = time.Time{}
			move(a, fp, alerts.StateInactive)
		case alerts.StateInactive:
			if t.Sub(a.ResolvedAt) >= ResolvedRetention {
				delete(m, fp)
				changed = true
			}
		}
	}
	for fp, a := range m {
		if a.State == alerts.StatePending && t.Sub(a.ActiveAt) >= r.For {
			a.FiredAt = t
			a.ResolvedAt = time.Time{}
			move(a, fp, alerts.StateFiring)
		}
	}
	return tr, changed || len(tr) > 0
}
