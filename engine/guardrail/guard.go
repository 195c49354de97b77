package guardrail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/rules"
)

// Verdict is the state of a guarded version.
type Verdict string

// Verdicts. Watching and Inconclusive are open states; Pass, Regression,
// the final Inconclusive (Final set) and Superseded are decisions.
// Superseded: another version went live before the watch reached a verdict
// (the version was never judged).
const (
	Watching     Verdict = "watching"
	Inconclusive Verdict = "inconclusive"
	Pass         Verdict = "pass"
	Regression   Verdict = "regression"
	Superseded   Verdict = "superseded"
)

// Check is one metric's comparison. For OfferedLoad, Effect is the ratio
// after/before and Tolerance is Options.LoadRatio. PValue and Effect are
// NaN (null in JSON) when the comparison could not be made.
type Check struct {
	Metric    Metric  `json:"metric"`
	Before    Summary `json:"before"`
	After     Summary `json:"after"`
	PValue    float64 `json:"p_value"`
	Effect    float64 `json:"effect"`
	Tolerance float64 `json:"tolerance"`
	Verdict   Verdict `json:"verdict"`
	Detail    string  `json:"detail"`
	// Since is, for a cumulative check, the activation whose window before
	// the after window is compared with (see Options.Drift); zero for the
	// checks against the window before this version.
	Since time.Time `json:"since,omitzero"`
}

// MarshalJSON writes a non-finite PValue or Effect as null.
func (c Check) MarshalJSON() ([]byte, error) {
	type plain Check
	return json.Marshal(struct {
		plain
		PValue *float64 `json:"p_value"`
		Effect *float64 `json:"effect"`
	}{plain(c), finite(c.PValue), finite(c.Effect)})
}

func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// Decision is the guardrail's state of one version.
type Decision struct {
	Service string `json:"service"`
	Version int64  `json:"version"`
	// Parent is the version a regression is rolled back to (0: none, as
	// for a rollback): the version in force before this one went live, or,
	// after a chain of versions replaced before a verdict (Unjudged), the
	// one in force before the chain.
	Parent      int64     `json:"parent"`
	ActivatedAt time.Time `json:"activated_at"`
	// Baseline is the end of the window before that the version is judged
	// against when that is not ActivatedAt (zero otherwise): the
	// activation of the oldest Unjudged version within reach (see the
	// package documentation).
	Baseline time.Time `json:"baseline,omitzero"`
	// Unjudged are the versions that went live after Parent and before
	// this one and were replaced before a verdict, oldest first.
	Unjudged []UnjudgedVersion `json:"unjudged,omitempty"`
	At       time.Time         `json:"at"`
	Verdict  Verdict           `json:"verdict"`
	// Final is true once the verdict no longer changes.
	Final  bool    `json:"final"`
	Reason string  `json:"reason"`
	Checks []Check `json:"checks"`
	// Confounders name what, besides the version, changed between the
	// windows at the latest evaluation: an offered load beyond LoadRatio,
	// incidents the version does not control.
	Confounders []string `json:"confounders,omitempty"`
	// RollbackVersion is the version the rollback created (0: none).
	RollbackVersion int64 `json:"rollback_version,omitempty"`
	// SupersededBy is, for a Superseded decision, the version that
	// replaced this one before a verdict, and SupersededAt when it went
	// live.
	SupersededBy int64     `json:"superseded_by,omitempty"`
	SupersededAt time.Time `json:"superseded_at,omitzero"`
	// Late is true for a version judged after the fact: it had been live
	// longer than Settle + MaxWait when this Guard first saw it (a
	// restart, a new leader), so it is judged on the windows around its
	// activation, read from the metrics store (see the package
	// documentation).
	Late bool `json:"late,omitempty"`
}

// UnjudgedVersion is a version replaced before its watch reached a verdict.
type UnjudgedVersion struct {
	Version     int64     `json:"version"`
	ActivatedAt time.Time `json:"activated_at"`
}

// watch is the state of one guarded version.
type watch struct {
	d Decision
	// parent is the version it replaced (d.Parent is 0 for a rollback,
	// which is never rolled back).
	parent   int64
	ruleset  *rules.Ruleset
	controls map[string]bool // downstreams whose rules it changes; nil until needed
	// sendsMore: it admits more than its parent, so every dependency's
	// trouble may be its doing.
	sendsMore bool
	// before holds the samples of the window before activation read so
	// far, by metric: that window lies in the past, so it is read once.
	// A map once stored here is never written again (copied to add).
	before map[Metric][]float64
	// grown holds, while the after window grows from activation + Settle,
	// the samples read so far that lie at least a Step in the past, by
	// metric: the window's grid stays put while it grows, so only the
	// newer points are read again. Copied to add, like before.
	grown map[Metric]grownSamples
	// retry is the reason of a regression whose rollback did not land (or
	// whose outcome the store did not tell): the next evaluation retries
	// that rollback instead of judging again. "" otherwise.
	retry string
	// origin is the activation of the oldest ancestor within Drift (see
	// findOrigin), whose window before the cumulative checks compare with,
	// originVersion that ancestor; zero: no cumulative check. originRead:
	// looked up already.
	origin        time.Time
	originVersion int64
	originRead    bool
	// steps are the ancestors from w's rollback target back to
	// originVersion, newest first, that went live before w's baseline:
	// with w, the steps whose own effects the cumulative checks add up.
	steps []int64
	// originSamples are the samples of the window before origin read so
	// far (without grid points), by metric; copied to add, like before.
	originSamples map[Metric][]float64
	// late is, for a version judged after the fact (d.Late), the time its
	// windows are taken at: the end of its first full after window, then
	// activation + Settle + MaxWait; zero for a version watched live.
	late time.Time
	// seen is, for a version judged after the fact, when this Guard first
	// saw it: held cycles end it inconclusive MaxWait after (see hold).
	seen time.Time
	// recheck: this evaluation only tells whether a regression found
	// after the fact still shows on the current window (see stillShows);
	// it decides nothing, rolls nothing back and emits nothing.
	recheck bool
}

// judgeAt is the time w's windows are taken at when evaluated at now.
func (w watch) judgeAt(now time.Time) time.Time {
	if !w.late.IsZero() {
		return w.late
	}
	return now
}

// grownSamples are the samples of a growing after window at the grid points
// before next.
type grownSamples struct {
	next time.Time
	vals []float64
}

// span is one read of an after window: the grid points from..to; keep:
// they lie a Step or more in the past, so they are kept for the next
// evaluation.
type span struct {
	from, to time.Time
	keep     bool
}

// afterSpans splits the after window of w for metric m into what must be
// read: all of it once full (its grid moves with now); while it grows, the
// points not kept yet that lie a Step or more in the past (kept), and the
// newer ones (read again next time, as a scrape may still land there).
func (g *Guard) afterSpans(win windows, w watch, m Metric) []span {
	if win.full {
		return []span{{from: win.aFrom, to: win.aTo}}
	}
	next := win.aFrom
	if k, ok := w.grown[m]; ok {
		next = k.next
	}
	var out []span
	if safe := win.aTo.Add(-g.o.Step); !safe.Before(next) {
		last := next.Add(safe.Sub(next) / g.o.Step * g.o.Step)
		out = append(out, span{from: next, to: last, keep: true})
		next = last.Add(g.o.Step)
	}
	if !next.After(win.aTo) {
		out = append(out, span{from: next, to: win.aTo})
	}
	return out
}

// Guard watches active versions. It is safe for concurrent use.
type Guard struct {
	o       Options
	mu      sync.Mutex
	watches map[string]*watch  // by service: the active version's state
	done    []Decision         // final decisions, newest last
	spans   map[string][]Noted // noted incidents by service
	rings   map[string]ring    // samples on the Step grid by service (see Record)
	// recorded are the grid times of the snapshots kept (Unix ns): a
	// service without a point there had no samples.
	recorded map[int64]bool
	noted    time.Time // time of the latest Note
	// heard is, by service, the newest heartbeat or report of any of its
	// instances (NoteHeartbeats).
	heard map[string]time.Time
	// unsettled are regressions whose rollback was to be retried when
	// their version stopped being active (or left the cycle) and whose
	// outcome a store read could not establish yet: each Observe reads
	// again whether the rollback landed.
	unsettled []watch
	// partial are the partial reads (PartialError texts) that held
	// watches during the latest Observe, each once; held are the services
	// of those watches.
	partial []string
	held    []string
	// unwatched are, by service, the active version logged as not judged
	// (live longer than Recover when first seen), so it is logged once.
	unwatched map[string]int64
}

// New validates the options and returns a Guard.
func New(o Options) (*Guard, error) {
	if err := o.fill(); err != nil {
		return nil, err
	}
	return &Guard{o: o, watches: map[string]*watch{}, spans: map[string][]Noted{}, unwatched: map[string]int64{}}, nil
}

// Observe updates the watches from the services' active versions at time now
// and evaluates every open one, rolling back regressions. It returns the
// decisions that became final during this call. Per-service failures are
// joined into the error; the other services are still evaluated.
func (g *Guard) Observe(ctx context.Context, now time.Time, active []versioning.Version) ([]Decision, error) {
	open, final, errs := g.update(ctx, now, active)
	for i := range open {
		// Before the reads: the cumulative checks' window is read with
		// the others.
		g.findOrigin(ctx, &open[i])
	}
	var view *gridView
	if bs, ok := g.ringed(); ok {
		v := g.fill(ctx, now, open, bs)
		view = &v
		g.prune(now)
	}
	for _, w := range open {
		w, err := g.evaluate(ctx, now, w, view)
		if err != nil {
			errs = append(errs, err)
			if !w.d.Final && w.retry == "" {
				continue
			}
			// A rollback that landed although the store answered with an
			// error is final; one that did not is kept to be retried.
		}
		final = g.store(w, final)
	}
	g.mu.Lock()
	if len(g.held) > 0 {
		g.o.Logger.Warn("guardrail held: reads of its windows warned that data may be missing, nothing judged or rolled back for these services",
			"tick", now, "services", g.held, "reads", g.partial)
	}
	g.mu.Unlock()
	return final, errors.Join(errs...)
}

// Hold is Observe for a cycle whose data the guardrail must not judge on,
// for the reason given ("metrics partial: <signal>: <warning>": the
// engine's snapshot or incident reads may lack data). The watches follow
// the active versions as in Observe (a new version is watched, one
// replaced before a verdict is superseded), but nothing is read, judged or
// rolled back, and a rollback to retry waits for a cycle that is not held.
// Every open watch past its settling is Inconclusive with reason; once
// MaxWait has passed since activation + Settle it is final, with a
// GuardrailInconclusive event, as when the guardrail's own reads stay
// partial; a version judged after the fact (Decision.Late) is final once
// MaxWait has passed since this Guard first saw it. So a store that stays
// partial leaves no version watched, and no service without proposals, for
// ever. It returns the decisions that
// became final during this call.
func (g *Guard) Hold(ctx context.Context, now time.Time, active []versioning.Version, reason string) ([]Decision, error) {
	open, final, errs := g.update(ctx, now, active)
	for _, w := range open {
		if w.retry != "" {
			continue
		}
		d := w.d
		d.At = now
		win := g.windows(w.judgeAt(now), d)
		if win.settling {
			d.Verdict, d.Reason = Watching, "settling: not enough samples after activation yet"
			w.d = d
		} else {
			w = g.hold(ctx, now, w, d, win.start, reason)
		}
		final = g.store(w, final)
	}
	return final, errors.Join(errs...)
}

// store writes the evaluated watch w back unless its version was replaced
// meanwhile, and keeps it and appends it to final when it is final.
func (g *Guard) store(w watch, final []Decision) []Decision {
	d := w.d
	g.mu.Lock()
	defer g.mu.Unlock()
	if cur := g.watches[d.Service]; cur != nil && cur.d.Version == d.Version {
		*cur = w
	}
	if d.Final {
		g.keep(d)
		final = append(final, d)
	}
	return final
}

// update makes the watches follow the active versions at time now (see
// Observe) and settles the rollbacks left to retry whose versions are no
// longer active. It returns the open watches to evaluate, the decisions
// that became final (superseded, settled) and the errors of settling.
func (g *Guard) update(ctx context.Context, now time.Time, active []versioning.Version) ([]watch, []Decision, []error) {
	var open []watch
	var superseded []Decision
	var unwatched []versioning.Version // too old to judge, logged once
	g.mu.Lock()
	seen := map[string]bool{}
	for _, v := range active {
		seen[v.Service] = true
		w := g.watches[v.Service]
		if w != nil && w.d.Version == v.Number {
			if !w.d.Final {
				open = append(open, *w)
			}
			continue
		}
		rollback := v.RollbackOf != 0 || v.Source == versioning.SourceRollback
		var prev *watch // replaced before a verdict
		switch {
		case w != nil && w.retry != "":
			// Replaced while its rollback was to be retried: the rollback
			// may have landed after all (its answer lost), or another
			// version replaced it.
			g.unsettled = append(g.unsettled, *w)
		case w != nil && !w.d.Final:
			prev = w
		}
		var next *watch
		age := now.Sub(v.ActivatedAt)
		switch {
		case v.Parent == 0 && v.RollbackOf == 0:
			// A service's first version: nothing before it to compare
			// with or return to.
			delete(g.watches, v.Service)
		case v.ActivatedAt.IsZero() || age > g.o.Settle+g.o.MaxWait && age > g.o.Recover:
			// Live for longer than Recover when first seen: taken as
			// judged by the run that watched it (say so once).
			delete(g.watches, v.Service)
			if g.unwatched[v.Service] != v.Number {
				g.unwatched[v.Service] = v.Number
				unwatched = append(unwatched, v)
			}
		default:
			next = &watch{d: Decision{Service: v.Service, Version: v.Number, Parent: v.Parent, ActivatedAt: v.ActivatedAt, Verdict: Watching},
				parent: v.Parent, ruleset: v.Ruleset}
			if age > g.o.Settle+g.o.MaxWait {
				// Went live while no Guard watched it (the engine down,
				// restarting, or without the lead) or its verdict was
				// lost with the Guard that reached it (a rollback still
				// to be retried): judged after the fact, on its first
				// full after window.
				next.d.Late = true
				next.late = v.ActivatedAt.Add(g.o.Settle + g.o.Window)
				next.seen = now
			}
			if rollback {
				next.d.Parent = 0 // a rollback is watched but never rolled back
			}
			// Judged against the last period judged good, past the
			// versions replaced before a verdict; not a rollback, which
			// starts afresh and is never rolled back, nor after one (the
			// period before a rollback is the one it undid).
			if prev != nil && !rollback && prev.d.Parent != 0 {
				g.chain(next, *prev)
			}
			g.watches[v.Service] = next
			open = append(open, *next)
		}
		if prev != nil {
			d := g.supersede(now, *prev, v, next)
			g.keep(d)
			superseded = append(superseded, d)
		}
	}
	for s, w := range g.watches {
		if !seen[s] {
			if w.retry != "" {
				g.unsettled = append(g.unsettled, *w)
			}
			delete(g.watches, s)
		}
	}
	unsettled := g.unsettled
	g.unsettled = nil
	g.partial, g.held = nil, nil
	for s := range g.unwatched {
		if !seen[s] {
			delete(g.unwatched, s)
		}
	}
	g.mu.Unlock()

	for _, v := range unwatched {
		g.o.Logger.Info("guardrail: not judging a version live for longer than Recover when first seen; taken as judged by the run that watched it",
			"service", v.Service, "version", v.Number, "activated_at", v.ActivatedAt, "recover", g.o.Recover)
	}

	for _, d := range superseded {
		g.o.Logger.Info("guardrail: version superseded before a verdict", "service", d.Service, "version", d.Version, "by", d.SupersededBy)
		g.o.Events.Emit(ctx, events.Event{Kind: events.GuardrailSuperseded, Severity: events.Warning, At: d.At, Service: d.Service,
			Version: d.Version, Message: fmt.Sprintf("%s v%d: guardrail gave no verdict: %s", d.Service, d.Version, d.Reason), Detail: d,
			Key: fmt.Sprintf("%s/%s/v%d", events.GuardrailSuperseded, d.Service, d.Version)})
	}
	final, errs := g.settle(ctx, now, unsettled)
	return open, append(superseded, final...), errs
}

// Partial returns the reads of the latest Observe that answered with a
// warning that data may be missing, each once as "metrics partial:
// <read>: <warning>" (PartialError): the watches they cover were held,
// neither judged nor rolled back. Nil when every read was whole. The
// engine lists them with its cycle's partial reads.
func (g *Guard) Partial() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.partial)
}

// holdPartial is hold for a read of w's windows that may lack data (pe),
// noted among the Observe's partial reads (Partial).
func (g *Guard) holdPartial(ctx context.Context, now time.Time, w watch, d Decision, start time.Time, pe *PartialError) watch {
	reason := pe.Error()
	g.mu.Lock()
	if !slices.Contains(g.partial, reason) {
		g.partial = append(g.partial, reason)
	}
	g.held = append(g.held, d.Service)
	g.mu.Unlock()
	return g.hold(ctx, now, w, d, start, reason)
}

// hold is watch w at time now, not judged because data it would be judged
// on may be missing (reason, "metrics partial: ..."): inconclusive, never
// a regression. Like any inconclusive verdict it becomes final at MaxWait
// after start (with a GuardrailInconclusive event), so a store that stays
// partial leaves no version watched, and no service without proposals, for
// ever.
//
// A version judged late (Decision.Late) has long passed that: its windows
// lie in the past, so it is judged once they read whole, and meanwhile the
// engine proposes nothing on top of it, but only for MaxWait from when
// this Guard first saw it; then it too ends inconclusive.
func (g *Guard) hold(ctx context.Context, now time.Time, w watch, d Decision, start time.Time, reason string) watch {
	d.Checks, d.Confounders = nil, nil
	limit := start.Add(g.o.MaxWait)
	if d.Late {
		limit = w.seen.Add(g.o.MaxWait)
	}
	if now.Before(limit) || w.recheck {
		d.Verdict, d.Reason = Inconclusive, reason+"; nothing judged on data that may be missing"
		w.d = d
		return w
	}
	d.Verdict, d.Final, d.Reason = Inconclusive, true, "inconclusive within the maximum wait: "+reason
	g.o.Events.Emit(ctx, events.Event{Kind: events.GuardrailInconclusive, Severity: events.Warning, At: now,
		Service: d.Service, Version: d.Version, Message: fmt.Sprintf("%s v%d: guardrail inconclusive: %s", d.Service, d.Version, reason), Detail: d})
	w.d = d
	return w
}

// supersede is the final decision of the open watch w, replaced by version
// v before a verdict at time now; next is v's watch (nil: not watched).
func (g *Guard) supersede(now time.Time, w watch, v versioning.Version, next *watch) Decision {
	d := w.d
	last := string(d.Verdict)
	if d.Reason != "" {
		last += ": " + d.Reason
	}
	d.At, d.Verdict, d.Final = now, Superseded, true
	d.SupersededBy, d.SupersededAt = v.Number, v.ActivatedAt
	when := "at an unknown time"
	if !v.ActivatedAt.IsZero() {
		when = fmt.Sprintf("at %s, %s after v%d went live at %s,", stamp(v.ActivatedAt), v.ActivatedAt.Sub(d.ActivatedAt), d.Version, stamp(d.ActivatedAt))
	}
	d.Reason = fmt.Sprintf("superseded by v%d, live %s before a verdict (it was %s)", v.Number, when, last)
	if next != nil && len(next.d.Unjudged) > 0 {
		d.Reason += fmt.Sprintf("; v%d is judged against the window before v%d and a regression of it rolls back to v%d",
			v.Number, chainStart(next.d), next.d.Parent)
	}
	return d
}

// chainStart is the version whose activation ends the window before that d
// is judged against: the oldest Unjudged version within reach, or d's own.
func chainStart(d Decision) int64 {
	for _, u := range d.Unjudged {
		if u.ActivatedAt.Equal(d.Baseline) {
			return u.Version
		}
	}
	return d.Version
}

// chain makes the new watch w carry on from prev, a watch replaced by it
// before a verdict: w is rolled back to prev's rollback target, past the
// unjudged versions, and judged against the window before the oldest of
// them whose activation lies within Settle + MaxWait (the time a version is
// watched) of w's, so that the window's grid points are still kept (see
// forget); with none within reach, against its own.
func (g *Guard) chain(w *watch, prev watch) {
	w.d.Unjudged = append(slices.Clip(prev.d.Unjudged), UnjudgedVersion{Version: prev.d.Version, ActivatedAt: prev.d.ActivatedAt})
	w.d.Parent, w.parent = prev.d.Parent, prev.parent
	for _, u := range w.d.Unjudged {
		if !u.ActivatedAt.IsZero() && w.d.ActivatedAt.Sub(u.ActivatedAt) <= g.o.Settle+g.o.MaxWait {
			w.d.Baseline = u.ActivatedAt
			break
		}
	}
	if !w.d.Baseline.IsZero() && w.d.Baseline.Equal(g.baseline(prev.d)) {
		w.before = prev.before // the same window, read already
	}
}

// baseline is the end of the window before that d is judged against.
func (g *Guard) baseline(d Decision) time.Time {
	if !d.Baseline.IsZero() {
		return d.Baseline
	}
	return d.ActivatedAt
}

// maxNamed bounds the unjudged versions a rollback's reason names.
const maxNamed = 8

// unjudgedNote says, for a rollback past unjudged versions, which versions
// it skips: "rolled back v3 to v1; v2 went live 40s before v3 and was never
// judged"; "" without any.
func unjudgedNote(d Decision) string {
	u := d.Unjudged
	if len(u) == 0 {
		return ""
	}
	note := fmt.Sprintf("rolled back v%d to v%d; ", d.Version, d.Parent)
	ago := func(u UnjudgedVersion) string { return d.ActivatedAt.Sub(u.ActivatedAt).String() }
	switch {
	case len(u) == 1:
		return note + fmt.Sprintf("v%d went live %s before v%d and was never judged", u[0].Version, ago(u[0]), d.Version)
	case len(u) > maxNamed:
		return note + fmt.Sprintf("%d versions, v%d to v%d, went live between %s and %s before v%d and were never judged",
			len(u), u[0].Version, u[len(u)-1].Version, ago(u[0]), ago(u[len(u)-1]), d.Version)
	}
	var vs, ds []string
	for _, x := range u {
		vs = append(vs, fmt.Sprintf("v%d", x.Version))
		ds = append(ds, ago(x))
	}
	and := func(s []string) string { return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1] }
	return note + fmt.Sprintf("%s went live %s before v%d and were never judged", and(vs), and(ds), d.Version)
}

// keep records a final decision; g.mu is held.
func (g *Guard) keep(d Decision) {
	g.done = append(g.done, d)
	if len(g.done) > g.o.Keep {
		g.done = append(g.done[:0:0], g.done[len(g.done)-g.o.Keep:]...)
	}
}

// settle decides the regressions whose rollback was to be retried but whose
// version is no longer active: rolled back when the store holds the
// guardrail's rollback of it (it landed although the store's answer said
// otherwise or was lost), otherwise not rolled back because another version
// replaced it. One whose store read fails stays unsettled for the next
// Observe.
func (g *Guard) settle(ctx context.Context, now time.Time, ws []watch) ([]Decision, []error) {
	var final []Decision
	var errs []error
	for _, w := range ws {
		d := w.d
		d.At, d.Reason = now, w.retry
		rb, err := g.findRollback(ctx, d)
		if err != nil {
			errs = append(errs, fmt.Errorf("guardrail: %s v%d: whether its rollback to v%d landed: %w", d.Service, d.Version, d.Parent, err))
			g.mu.Lock()
			g.unsettled = append(g.unsettled, w)
			g.mu.Unlock()
			continue
		}
		d.Final = true
		if rb.Number != 0 {
			g.rolledBack(ctx, &d, rb, nil)
		} else {
			d.Reason += " (not rolled back: another version replaced it since)"
		}
		g.mu.Lock()
		g.keep(d)
		g.mu.Unlock()
		final = append(final, d)
	}
	return final, errs
}

// conditions are what else changed between the windows of one evaluation.
type conditions struct {
	// load is the ratio of the offered load's means after/before, shift
	// the ratio of the mean or the median, whichever moved farther; NaN
	// when unknown.
	load, shift float64
	// rose and fell: shift is beyond LoadRatio.
	rose, fell bool
	// after: incidents overlapping the after window; any: either window.
	after, any []string
	// confounders lists all of it for people.
	confounders []string
}

// windows are the before and after windows of a watch at time now; settling
// is true while the after window holds fewer than MinSamples steps. The
// after window grows to Window, then slides (full): a version judged
// inconclusive (a traffic change, an incident) is judged again on the
// latest Window until MaxWait.
type windows struct {
	bFrom, bTo, aFrom, aTo time.Time
	start                  time.Time // activation + Settle
	full, settling         bool
}

func (g *Guard) windows(now time.Time, d Decision) windows {
	start := d.ActivatedAt.Add(g.o.Settle)
	base := g.baseline(d)
	win := windows{bFrom: base.Add(-g.o.Window), bTo: base.Add(-time.Millisecond), aFrom: start, aTo: now, start: start,
		full: !now.Before(start.Add(g.o.Window)), settling: now.Before(start.Add(time.Duration(g.o.MinSamples) * g.o.Step))}
	if win.full {
		win.aFrom = now.Add(-g.o.Window)
	}
	return win
}

// readKey names the samples of one service's metric over one window.
type readKey struct {
	service  string
	m        Metric
	from, to time.Time
}

// goodputShare is (1 - shed ratio) x (1 - error ratio) at every step both
// have a sample, and 0 at every step that sheds everything (no error ratio
// then: nothing was admitted), as the GoodputShare query computes it (and a
// grid point derives it).
func goodputShare(shed, errs []signals.Point) []float64 {
	var out []float64
	for _, p := range shed {
		q := emptyPoint()
		q.set(ShedRatio, p.V)
		i, ok := slices.BinarySearchFunc(errs, p.T, func(q signals.Point, t time.Time) int { return q.T.Compare(t) })
		if ok {
			q.set(ErrorRatio, errs[i].V)
		}
		if v := q.value(GoodputShare); !math.IsNaN(v) {
			out = append(out, v)
		}
	}
	return out
}

// admittedShare is 1 - shed ratio at every step, as the AdmittedShare query
// computes it (and a grid point derives it).
func admittedShare(shed []signals.Point) []float64 {
	out := make([]float64, 0, len(shed))
	for _, p := range shed {
		q := emptyPoint()
		q.set(ShedRatio, p.V)
		out = append(out, q.value(AdmittedShare))
	}
	return out
}

// maxBatch bounds the services of one batched read: PromQL turns a service
// matcher of up to 256 alternatives into direct index lookups, and matches
// a longer one against every service name with a regular expression.
const maxBatch = 200

// evaluate judges one watch at time now: from the grid points of view, or
// (without a view, or when its batched read failed) reading the service
// alone on the watch's own grid.
func (g *Guard) evaluate(ctx context.Context, now time.Time, w watch, view *gridView) (watch, error) {
	d := w.d
	d.At = now
	if w.retry != "" {
		// Judged a regression, its rollback did not land: retry that
		// rollback rather than judge again.
		d.Reason = w.retry
		return g.rollBack(ctx, w, d)
	}
	// A late version's windows are taken at w.late, in the past.
	at := w.judgeAt(now)
	win := g.windows(at, d)
	if win.settling {
		d.Verdict, d.Reason = Watching, "settling: not enough samples after activation yet"
		w.d = d
		return w, nil
	}
	g.findOrigin(ctx, &w)
	full := win.full
	start := win.start
	bFrom, bTo, aFrom, aTo := win.bFrom, win.bTo, win.aFrom, win.aTo
	if view != nil && view.partial[d.Service] != nil {
		return g.holdPartial(ctx, now, w, d, start, view.partial[d.Service]), nil
	}
	if view != nil && view.failed[d.Service] {
		view = nil
	}
	read1 := func(m Metric, from, to time.Time) ([]float64, error) {
		v, err := g.o.Series.Samples(ctx, d.Service, m, from, to, g.o.Step)
		if err != nil {
			return nil, fmt.Errorf("guardrail: %s v%d: %w", d.Service, d.Version, err)
		}
		return v, nil
	}
	samples := func(m Metric) ([]float64, []float64, error) {
		if view != nil {
			return view.samples(d.Service, m, bFrom, bTo), view.samples(d.Service, m, aFrom, aTo), nil
		}
		before, ok := w.before[m]
		if !ok {
			var err error
			if before, err = read1(m, bFrom, bTo); err != nil {
				return nil, nil, err
			}
			// The window before activation is past: keep it (a new map,
			// since copies of the watch share the old one).
			cached := make(map[Metric][]float64, len(w.before)+1)
			for k, v := range w.before {
				cached[k] = v
			}
			cached[m] = before
			w.before = cached
		}
		var after []float64
		if k, ok := w.grown[m]; ok && !full {
			after = k.vals[:len(k.vals):len(k.vals)]
		}
		for _, sp := range g.afterSpans(win, w, m) {
			v, err := read1(m, sp.from, sp.to)
			if err != nil {
				return nil, nil, err
			}
			after = append(after, v...)
			if sp.keep {
				kept := make(map[Metric]grownSamples, len(w.grown)+1)
				for k, v := range w.grown {
					kept[k] = v
				}
				kept[m] = grownSamples{next: sp.to.Add(g.o.Step), vals: after[:len(after):len(after)]}
				w.grown = kept
			}
		}
		return before, after, nil
	}
	read := func(m Metric) (Summary, Summary, error) {
		before, after, err := samples(m)
		return summarize(before), summarize(after), err
	}
	// originRead are the samples of the window before w.origin.
	oFrom, oTo := w.origin.Add(-g.o.Window), w.origin.Add(-time.Millisecond)
	originRead := func(m Metric) ([]float64, error) {
		if view != nil {
			return view.samples(d.Service, m, oFrom, oTo), nil
		}
		if v, ok := w.originSamples[m]; ok {
			return v, nil
		}
		v, err := read1(m, oFrom, oTo)
		if err != nil {
			return nil, err
		}
		cached := make(map[Metric][]float64, len(w.originSamples)+1)
		for k, x := range w.originSamples {
			cached[k] = x
		}
		cached[m] = v
		w.originSamples = cached
		return v, nil
	}

	var pe *PartialError
	lb, la, err := samples(OfferedLoad)
	if errors.As(err, &pe) {
		return g.holdPartial(ctx, now, w, d, start, pe), nil
	}
	if err != nil {
		return w, err
	}
	load, shift := g.loadCheck(lb, la)
	cond := conditions{load: load.Effect, shift: shift.ratio}
	if !math.IsNaN(shift.ratio) {
		cond.rose, cond.fell = shift.ratio > g.o.LoadRatio, shift.ratio < 1/g.o.LoadRatio
	}
	switch {
	case cond.rose:
		cond.confounders = append(cond.confounders, fmt.Sprintf("offered load rose %s after activation (%s %.1f/s -> %.1f/s)",
			times(shift.ratio), shift.measure, shift.before, shift.after))
	case cond.fell:
		cond.confounders = append(cond.confounders, fmt.Sprintf("offered load fell %s after activation (%s %.1f/s -> %.1f/s)",
			times(1/shift.ratio), shift.measure, shift.before, shift.after))
	}
	if err := g.incidents(ctx, &w, &cond, bFrom, aFrom, aTo); err != nil {
		return w, err
	}

	d.Checks = append(d.Checks[:0:0], load)
	for _, m := range Metrics {
		if m == GoodputShare && len(cond.any) > 0 {
			// Errors are confounded: judge what the version decides.
			m = AdmittedShare
		}
		before, after, err := read(m)
		if errors.As(err, &pe) {
			return g.holdPartial(ctx, now, w, d, start, pe), nil
		}
		if err != nil {
			return w, err
		}
		d.Checks = append(d.Checks, g.compare(m, before, after, cond))
	}
	d.Confounders = cond.confounders
	silent, running := g.silence(w.d, win, lb, d.Checks)
	var regressed, inconclusive []string
	for _, c := range d.Checks {
		switch c.Verdict {
		case Regression:
			regressed = append(regressed, c.Detail)
		case Inconclusive:
			inconclusive = append(inconclusive, c.Detail)
		}
	}
	if silent != "" {
		// Every check lacks samples after: say why once.
		inconclusive = []string{silent}
	}
	if !w.origin.IsZero() && silent == "" {
		cum, err := g.cumulative(w, cond, la, d.Checks, originRead)
		if errors.As(err, &pe) {
			return g.holdPartial(ctx, now, w, d, start, pe), nil
		}
		if err != nil {
			return w, err
		}
		for _, c := range cum {
			// Only a regression counts: an older window is often not
			// comparable (traffic moves over an hour), and the version
			// is judged against its own parent's window anyway.
			if c.Verdict == Regression {
				regressed = append(regressed, c.Detail)
			}
		}
		d.Checks = append(d.Checks, cum...)
	}
	if w.recheck {
		switch {
		case len(regressed) > 0 || silent != "" && full && running:
			d.Verdict, d.Reason = Regression, strings.Join(regressed, "; ")
		case len(inconclusive) > 0:
			d.Verdict, d.Reason = Inconclusive, strings.Join(inconclusive, "; ")
		default:
			d.Verdict, d.Reason = Pass, ""
		}
		w.d = d
		return w, nil
	}
	late := ""
	if d.Late {
		late = g.lateNote(d, win)
	}
	if d.Late && (len(regressed) > 0 || silent != "" && full && running) {
		// Found after the fact, without the incidents of that time: roll
		// back only what still shows now.
		w2, done, confirmed, err := g.stillShows(ctx, now, w, d, late)
		if done || err != nil {
			return w2, err
		}
		late = "; " + confirmed + late
	}
	switch {
	case len(regressed) > 0:
		d.Verdict, d.Final = Regression, true
		d.Reason = "guardrail: regression after v" + fmt.Sprint(d.Version) + ": " + strings.Join(regressed, "; ")
		if len(cond.confounders) > 0 {
			d.Reason += " (beyond what these explain: " + strings.Join(cond.confounders, "; ") + ")"
		}
		d.Reason += late
		return g.rollBack(ctx, w, d)
	case silent != "" && full && running:
		// Its instances run (they were heard from since the window began)
		// but none reports: the version crashes them or stops them
		// reporting.
		d.Verdict, d.Final, d.Reason = Regression, true, "guardrail: "+silent+late
		return g.rollBack(ctx, w, d)
	case len(inconclusive) == 0 && full:
		d.Verdict, d.Final, d.Reason = Pass, true, "no regression beyond tolerance over the full window"+late
	case len(inconclusive) > 0 && !at.Before(start.Add(g.o.MaxWait)):
		d.Verdict, d.Final, d.Reason = Inconclusive, true, "inconclusive within the maximum wait: "+strings.Join(inconclusive, "; ")+late
		msg := fmt.Sprintf("%s v%d: guardrail inconclusive: %s", d.Service, d.Version, strings.Join(inconclusive, "; "))
		if d.Late {
			// As a live watch lets go at MaxWait: proposals resume, and
			// the event tells people the version was never judged.
			msg = fmt.Sprintf("%s v%d: guardrail could not judge it after the fact (%s)%s; proposals resume on top of it",
				d.Service, d.Version, strings.Join(inconclusive, "; "), late)
		}
		g.o.Events.Emit(ctx, events.Event{Kind: events.GuardrailInconclusive, Severity: events.Warning, At: now,
			Service: d.Service, Version: d.Version, Message: msg, Detail: d})
	case len(inconclusive) > 0:
		d.Verdict, d.Reason = Inconclusive, "inconclusive so far: "+strings.Join(inconclusive, "; ")+late
		if d.Late {
			// Judged again on the last window a live watch reaches.
			w.late = start.Add(g.o.MaxWait)
		}
	default:
		d.Verdict, d.Reason = Watching, "no regression so far"
	}
	w.d = d
	return w, nil
}

// stillShows judges the late watch w, found regressed on the windows
// around its activation (d, late its lateNote), again on the current full
// window against the same window before: a regression seen then may have
// been an incident of that time that a live watch knew of and this Guard
// does not. When it still shows, under about the offered load of the
// window before (within driftLoadRatio: the two may be hours apart), the
// caller rolls back (done false; confirmed says what still shows). When
// it no longer does, or the current window cannot tell, d is final
// Inconclusive without a rollback (done). A read that may lack data keeps
// the watch open (done) until MaxWait after this Guard first saw it.
func (g *Guard) stillShows(ctx context.Context, now time.Time, w watch, d Decision, late string) (watch, bool, string, error) {
	c := w
	c.late, c.recheck, c.grown = time.Time{}, true, nil
	c.d.Late = false
	r, err := g.evaluate(ctx, now, c, nil)
	if err != nil {
		return w, true, "", err
	}
	cur := g.windows(now, d)
	// The window before activation may be hours older than the current
	// one: p99 and errors follow the traffic of the day, so only a current
	// window under about the same offered load confirms a regression (as
	// the cumulative checks require, driftLoadRatio).
	moved := ""
	for _, ck := range r.d.Checks {
		if ck.Metric != OfferedLoad {
			continue
		}
		if x := ck.Effect; math.IsNaN(x) || x > driftLoadRatio || x < 1/driftLoadRatio {
			moved = fmt.Sprintf("offered load moved %s between the window before activation and the current one (beyond %.2fx)",
				times(max(x, 1/x)), driftLoadRatio)
			if math.IsNaN(x) {
				moved = "offered load of the current window unknown"
			}
		}
	}
	if r.d.Verdict == Regression && moved == "" {
		return w, false, fmt.Sprintf("still shows on the current window %s to %s: %s", stamp(cur.aFrom), stamp(cur.aTo),
			strings.Join(regressedDetails(r.d.Checks), "; ")), nil
	}
	what := strings.Join(regressedDetails(d.Checks), "; ")
	if what == "" {
		what = "no instance reported"
	}
	d.Verdict = Inconclusive
	switch {
	case r.d.Verdict == Regression:
		d.Reason = fmt.Sprintf("not rolled back: the regression seen after activation (%s) cannot be confirmed on the current window %s to %s: %s%s",
			what, stamp(cur.aFrom), stamp(cur.aTo), moved, late)
	case r.d.Checks == nil && now.Before(w.seen.Add(g.o.MaxWait)):
		// Held (data may be missing): look again at the next evaluation.
		d.Reason = fmt.Sprintf("found regressed after the fact (%s); whether it still shows on the current window: %s%s", what, r.d.Reason, late)
		w.d = d
		return w, true, "", nil
	case r.d.Checks == nil || r.d.Verdict == Inconclusive:
		d.Reason = fmt.Sprintf("not rolled back: the regression seen after activation (%s) cannot be confirmed on the current window %s to %s (%s)%s",
			what, stamp(cur.aFrom), stamp(cur.aTo), r.d.Reason, late)
	default:
		d.Reason = fmt.Sprintf("not rolled back: the regression seen after activation (%s) no longer shows on the current window %s to %s; "+
			"it may have been an incident of that time, unknown to this guardrail%s", what, stamp(cur.aFrom), stamp(cur.aTo), late)
	}
	d.Final = true
	g.o.Events.Emit(ctx, events.Event{Kind: events.GuardrailInconclusive, Severity: events.Warning, At: now,
		Service: d.Service, Version: d.Version, Message: fmt.Sprintf("%s v%d: guardrail %s", d.Service, d.Version, d.Reason), Detail: d})
	w.d = d
	return w, true, "", nil
}

// regressedDetails are the Details of the regressed checks.
func regressedDetails(cs []Check) []string {
	var out []string
	for _, c := range cs {
		if c.Verdict == Regression {
			out = append(out, c.Detail)
		}
	}
	return out
}

// maxAncestors bounds the store reads of findOrigin.
const maxAncestors = 64

// findOrigin looks up, once per watch, the oldest of w's ancestors (its
// parent, the parent's parent, ...) activated within Drift before w's own
// activation, before w's baseline, with a version before it and not a
// rollback (a rollback starts afresh): the window before its activation is
// the baseline of the cumulative checks. None (drift off, a rollback, no
// such ancestor): no cumulative check. A failed store read is logged and
// tried again at the next evaluation.
func (g *Guard) findOrigin(ctx context.Context, w *watch) {
	if w.originRead {
		return
	}
	if g.o.Drift < 0 || w.d.Parent == 0 {
		w.originRead = true
		return
	}
	base := g.baseline(w.d)
	var at time.Time
	var ver int64
	var steps []int64
	for i, n := 0, w.parent; n != 0 && i < maxAncestors; i++ {
		p, err := g.o.Store.Get(ctx, w.d.Service, n)
		if err != nil {
			g.o.Logger.Warn("guardrail: no cumulative check this cycle: reading an earlier version failed",
				"service", w.d.Service, "version", w.d.Version, "ancestor", n, "err", err)
			return
		}
		if p.RollbackOf != 0 || p.Source == versioning.SourceRollback || p.Parent == 0 || p.ActivatedAt.IsZero() ||
			w.d.ActivatedAt.Sub(p.ActivatedAt) > g.o.Drift {
			break
		}
		if p.ActivatedAt.Before(base) {
			at, ver = p.ActivatedAt, p.Number
			steps = append(steps, p.Number)
		}
		n = p.Parent
	}
	w.origin, w.originVersion, w.steps, w.originRead = at, ver, steps, true
}

// driftLoadRatio is how far the offered load may have moved between the
// window before w.origin and the after window for the cumulative checks to
// count: traffic moves over an hour, and latency and errors with it.
const driftLoadRatio = 1.1

// cumulative compares the after window of w with the window before
// w.origin, each judged metric with the same tolerances as compare, under
// the load change between those windows and the incidents of cond: small
// steps, each within tolerance of its parent, do not add up without bound.
// after are the offered-load samples of the after window, checks the
// evaluation's checks against the window before w (their After summaries
// are reused), origin reads the window before w.origin.
func (g *Guard) cumulative(w watch, cond conditions, after []float64, checks []Check, origin func(Metric) ([]float64, error)) ([]Check, error) {
	ob, err := origin(OfferedLoad)
	if err != nil {
		return nil, err
	}
	load, shift := g.loadCheck(ob, after)
	cc := conditions{load: load.Effect, shift: shift.ratio, after: cond.after, any: cond.any}
	if !math.IsNaN(shift.ratio) {
		cc.rose, cc.fell = shift.ratio > g.o.LoadRatio, shift.ratio < 1/g.o.LoadRatio
	}
	since := fmt.Sprintf("since before v%d (live at %s): ", w.originVersion, stamp(w.origin))
	// Over up to Drift, p99 and the error ratio follow the traffic (a
	// daily ramp, well within LoadRatio): unless the offered load is about
	// where it was, a rise since then says nothing of the versions.
	moved := ""
	switch r := shift.ratio; {
	case math.IsNaN(r):
		moved = "offered load of the older window unknown"
	case r > driftLoadRatio || r < 1/driftLoadRatio:
		moved = fmt.Sprintf("offered load moved %s since then (%s %.1f/s -> %.1f/s, beyond %.2fx)",
			times(max(r, 1/r)), shift.measure, shift.before, shift.after, driftLoadRatio)
	}
	var out []Check
	for _, own := range checks {
		if own.Metric == OfferedLoad {
			continue
		}
		b, err := origin(own.Metric)
		if err != nil {
			return nil, err
		}
		c := g.compare(own.Metric, summarize(b), own.After, cc)
		switch {
		case moved != "":
			c.Verdict, c.Detail = Inconclusive, fmt.Sprintf("%s not compared: %s", own.Metric, moved)
		case c.Verdict == Regression:
			// The older window differs by more than the tolerance; count
			// it only when the versions' own steps add up to that too,
			// not when the service drifted between them.
			if sum, why := g.stepEffects(w, own); why != "" {
				c.Verdict, c.Detail = Inconclusive, c.Detail+"; not held against the versions: "+why
			} else if !(sum > c.Tolerance) {
				c.Verdict = Inconclusive
				c.Detail += fmt.Sprintf("; not held against the versions: their own steps add up to %s only", effectText(own.Metric, sum))
			}
		}
		c.Since, c.Detail = w.origin, since+c.Detail
		out = append(out, c)
	}
	return out, nil
}

// stepEffects adds up the own effects of the versions between w.origin and
// w on the metric of own (w's check against its own window before): p99
// latency's relative rises multiply, the error ratio's absolute rises add,
// the goodput share's relative drops multiply. Each ancestor's effect is
// taken from the decision this Guard reached on it (Pass or a final
// Inconclusive); why says which one is unknown (not judged by this Guard,
// as after a restart, or no effect measured), and then nothing is added.
func (g *Guard) stepEffects(w watch, own Check) (sum float64, why string) {
	if math.IsNaN(own.Effect) {
		return 0, "its own effect is unknown"
	}
	effects := []float64{own.Effect}
	g.mu.Lock()
	for _, n := range w.steps {
		e := math.NaN()
		superseded := false
		for i := len(g.done) - 1; i >= 0; i-- {
			d := g.done[i]
			if d.Service == w.d.Service && d.Version == n && d.Verdict == Superseded {
				// Replaced before a verdict: the version that replaced it
				// was judged against the window before it, so its effect
				// is inside that version's own.
				superseded = true
				break
			}
			if d.Service != w.d.Service || d.Version != n || (d.Verdict != Pass && d.Verdict != Inconclusive) {
				continue
			}
			for _, c := range d.Checks {
				if c.Since.IsZero() && (c.Metric == own.Metric || share(c.Metric) && share(own.Metric)) && !math.IsNaN(c.Effect) {
					e = c.Effect
					break
				}
			}
			break
		}
		if superseded {
			continue
		}
		if math.IsNaN(e) {
			g.mu.Unlock()
			return 0, fmt.Sprintf("the own effect of v%d is unknown to this guardrail (not judged by it, or not measured)", n)
		}
		effects = append(effects, e)
	}
	g.mu.Unlock()
	if own.Metric == ErrorRatio {
		for _, e := range effects {
			sum += e
		}
		return sum, ""
	}
	prod := 1.0
	for _, e := range effects {
		if own.Metric == LatencyP99 {
			prod *= 1 + e
		} else {
			prod *= 1 - e
		}
	}
	if own.Metric == LatencyP99 {
		return prod - 1, ""
	}
	return 1 - prod, ""
}

// share: m is the goodput or the admitted share.
func share(m Metric) bool { return m == GoodputShare || m == AdmittedShare }

// effectText formats a summed step effect of metric m.
func effectText(m Metric, e float64) string {
	switch {
	case m == ErrorRatio:
		return fmt.Sprintf("%+.4f", e)
	case m == LatencyP99:
		return fmt.Sprintf("%+.1f%%", 100*e)
	}
	return fmt.Sprintf("%+.1f%%", -100*e)
}

// lateNote says, for a version judged after the fact, on which windows.
func (g *Guard) lateNote(d Decision, win windows) string {
	return fmt.Sprintf(" (judged after the fact: v%d went live at %s, more than settle + max wait (%s) before this guardrail first saw it, "+
		"after a restart or a change of leader; windows %s to %s and %s to %s, incidents of that time unknown)",
		d.Version, stamp(d.ActivatedAt), g.o.Settle+g.o.MaxWait, stamp(win.bFrom), stamp(win.bTo), stamp(win.aFrom), stamp(win.aTo))
}

// othersReported reports whether, at MinSamples grid points in [from, to]
// or more, another service had a sample (recorded or read): the metrics
// store answered for the fleet while the service was silent. It needs the
// grid points of a BatchSeries.
func (g *Guard) othersReported(service string, from, to time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for t := g.gridFrom(from); !t.After(to); t = t.Add(g.o.Step) {
		key := t.UnixNano()
		for svc, r := range g.rings {
			if p, ok := r[key]; ok && svc != service && p.any() {
				n++
				break
			}
		}
	}
	return n >= g.o.MinSamples
}

// silence says "no instance reported after vN: ..." when the service had
// traffic in the window before activation (MinSamples offered-load samples,
// a mean above 0) and the after window holds no sample of any metric: every
// instance stopped reporting (crashed, or refuses or drops everything
// before it is counted), or the service was removed; "" otherwise. A
// service with no traffic still reports a rate of 0, which is a sample.
// running: an instance was heard from (NoteHeartbeats) after the after
// window began, so the service was not removed, and other services
// reported meanwhile, so the metrics store did not lose them all.
func (g *Guard) silence(d Decision, win windows, before []float64, checks []Check) (msg string, running bool) {
	b := summarize(before)
	if b.N < g.o.MinSamples || !(b.Mean > 0) {
		return "", false
	}
	for _, c := range checks {
		if c.After.N > 0 {
			return "", false
		}
	}
	msg = fmt.Sprintf("no instance reported after v%d: offered load %.1f/s before activation (%d samples), no sample of any signal from %s to %s",
		d.Version, b.Mean, b.N, stamp(win.aFrom), stamp(win.aTo))
	_, ringed := g.ringed()
	switch h, ok := g.lastHeard(d.Service); {
	case ok && h.After(win.aFrom) && !ringed:
		msg += fmt.Sprintf("; not rolled back: an instance was heard from at %s (delivery ledger), but whether other services reported meanwhile is unknown (the series are read service by service)", stamp(h))
	case ok && h.After(win.aFrom) && !g.othersReported(d.Service, win.aFrom, win.aTo):
		// The metrics pipeline, not the version, may have lost it: no
		// version is rolled back for a store that lost every service.
		msg += fmt.Sprintf("; not rolled back: an instance was heard from at %s (delivery ledger), but no other service reported over that span either (the metrics pipeline may be failing)", stamp(h))
	case ok && h.After(win.aFrom):
		running = true
		msg += fmt.Sprintf(", though an instance was heard from at %s (delivery ledger) and other services reported: it runs but reports nothing", stamp(h))
	case ok:
		msg += fmt.Sprintf("; not rolled back: no instance heard from since %s (delivery ledger), the service may have been removed on purpose", stamp(h))
	default:
		msg += "; not rolled back: no instance known to the delivery ledger, the service may have been removed on purpose"
	}
	return msg, running
}

// stamp formats a time for a decision's reason.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// NoteHeartbeats records, by service, the newest heartbeat or report the
// delivery ledger has of any of the service's instances (any state, GONE
// included); the evaluator calls it every cycle it could read the ledger,
// with every service it knows. It replaces what was noted before. A version
// after which no instance reports any signal for a full Window is rolled
// back only when an instance of its service was heard from within that
// window (it runs, or restarts, but reports nothing) and other services
// reported meanwhile. Otherwise (no ledger, every instance silent there
// too, as when the service was removed on purpose, or the whole fleet
// silent) the version is only flagged: inconclusive, and at MaxWait final
// with a GuardrailInconclusive event. See the package documentation.
func (g *Guard) NoteHeartbeats(lastSeen map[string]time.Time) {
	heard := make(map[string]time.Time, len(lastSeen))
	for svc, t := range lastSeen {
		if !t.IsZero() {
			heard[svc] = t
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.heard = heard
}

// lastHeard is the service's newest heartbeat noted.
func (g *Guard) lastHeard(service string) (time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	t, ok := g.heard[service]
	return t, ok
}

// loadShift is how far the offered load moved: the ratio after/before of
// the measure (mean or median) that moved farther.
type loadShift struct {
	measure       string
	before, after float64
	ratio         float64 // NaN: unknown
}

// loadCheck compares the offered load of the two windows: Pass when
// comparable, Inconclusive otherwise or with too few samples. Its Effect is
// the ratio of the means after/before (NaN: unknown). The windows are
// comparable when both the means and the medians are within LoadRatio of
// each other either way: the mean catches a sustained change, the median a
// burst that covers most of one window but moves the mean less (a spike
// that fills the after window but only the end of the one before).
func (g *Guard) loadCheck(beforeSamples, afterSamples []float64) (Check, loadShift) {
	before, after := summarize(beforeSamples), summarize(afterSamples)
	c := Check{Metric: OfferedLoad, Before: before, After: after, PValue: math.NaN(), Effect: math.NaN(), Tolerance: g.o.LoadRatio}
	if before.N < g.o.MinSamples || after.N < g.o.MinSamples {
		c.Verdict = Inconclusive
		c.Detail = fmt.Sprintf("%s: %d samples before and %d after, need %d each", OfferedLoad, before.N, after.N, g.o.MinSamples)
		return c, loadShift{ratio: math.NaN()}
	}
	c.Effect = ratio(after.Mean, before.Mean)
	mb, ma := median(beforeSamples), median(afterSamples)
	shift := loadShift{measure: "mean", before: before.Mean, after: after.Mean, ratio: c.Effect}
	if r := ratio(ma, mb); math.Abs(math.Log(r)) > math.Abs(math.Log(c.Effect)) {
		shift = loadShift{measure: "median", before: mb, after: ma, ratio: r}
	}
	c.Detail = fmt.Sprintf("offered load %.1f/s -> %.1f/s (%s; medians %.1f/s -> %.1f/s; comparable within %s)",
		before.Mean, after.Mean, times(c.Effect), mb, ma, times(g.o.LoadRatio))
	if shift.ratio > g.o.LoadRatio || shift.ratio < 1/g.o.LoadRatio {
		c.Verdict = Inconclusive
		c.Detail += ": windows not comparable"
	} else {
		c.Verdict = Pass
	}
	return c, shift
}

// ratio is after/before, +Inf when only after is positive, 1 when neither.
func ratio(after, before float64) float64 {
	switch {
	case before > 0:
		return after / before
	case after > 0:
		return math.Inf(1)
	}
	return 1
}

// incidents fills the conditions with the noted incidents overlapping the
// windows, leaving out those on downstreams whose rules the version
// changes, and every downstream's when it admits more than its parent.
func (g *Guard) incidents(ctx context.Context, w *watch, cond *conditions, bFrom, aFrom, aTo time.Time) error {
	spans := g.incidentsIn(w.d.Service, bFrom, aTo)
	if len(spans) == 0 {
		return nil
	}
	if w.controls == nil {
		w.controls = map[string]bool{}
		if w.parent != 0 {
			p, err := g.o.Store.Get(ctx, w.d.Service, w.parent)
			if err != nil {
				w.controls = nil
				return fmt.Errorf("guardrail: %s v%d: parent v%d: %w", w.d.Service, w.d.Version, w.parent, err)
			}
			w.controls = changedDownstreams(w.ruleset, p.Ruleset)
			w.sendsMore = admitsMore(w.ruleset, p.Ruleset)
		}
	}
	act := w.d.ActivatedAt
	for _, s := range spans {
		if s.Downstream != "" && (w.sendsMore || w.controls[s.Downstream]) {
			continue
		}
		when := "across activation"
		switch {
		case s.To.Before(act):
			when = "before activation"
		case !s.From.Before(act):
			when = "after activation"
		}
		what := s.What + " (" + when + ")"
		cond.any = append(cond.any, what)
		if !s.To.Before(aFrom) {
			cond.after = append(cond.after, what)
		}
		cond.confounders = append(cond.confounders, what)
	}
	return nil
}

// compare judges one metric under the conditions of the evaluation:
//
//   - Error ratio and p99 latency: a regression while the offered load rose
//     beyond LoadRatio, or while an incident overlaps the after window, is
//     Inconclusive (the load or the incident may explain it); one while the
//     load fell stands (less traffic does not explain more errors or slower
//     answers). They pass only when neither the load moved beyond LoadRatio
//     nor an incident overlaps either window.
//   - Goodput (or admitted) share: judged against what the load explains.
//     When the offered load rose by r, a version as good as its parent may
//     serve the same number of requests and refuse the rest, so the floor
//     is the share before divided by r; a regression is a share below that
//     floor beyond the tolerance, i.e. fewer requests served without error
//     than before despite more traffic, and it stands whatever the load.
//     It passes only when the load did not move beyond LoadRatio.
func (g *Guard) compare(m Metric, before, after Summary, cond conditions) Check {
	c := Check{Metric: m, Before: before, After: after, PValue: math.NaN(), Effect: math.NaN()}
	if before.N < g.o.MinSamples || after.N < g.o.MinSamples {
		c.Verdict = Inconclusive
		c.Detail = fmt.Sprintf("%s: %d samples before and %d after, need %d each", m, before.N, after.N, g.o.MinSamples)
		return c
	}
	var worse bool
	switch m {
	case ErrorRatio:
		c.Tolerance, c.Effect = g.o.ErrorTolerance, after.Mean-before.Mean
		c.PValue = welchGreater(before, after)
		worse = c.Effect > c.Tolerance
		c.Detail = fmt.Sprintf("error ratio %.4f -> %.4f (tolerance +%.4f, p=%.3g)", before.Mean, after.Mean, c.Tolerance, c.PValue)
	case LatencyP99:
		c.Tolerance, c.Effect = g.o.LatencyTolerance, rel(after.Mean, before.Mean)
		c.PValue = welchGreater(before, after)
		worse = c.Effect > c.Tolerance
		c.Detail = fmt.Sprintf("p99 latency %.4fs -> %.4fs (%+.1f%%, tolerance +%.0f%%, p=%.3g)", before.Mean, after.Mean, 100*c.Effect, 100*c.Tolerance, c.PValue)
	default: // GoodputShare, AdmittedShare
		name := "goodput share"
		if m == AdmittedShare {
			name = "admitted share (errors confounded by an incident)"
		}
		floor := before
		if cond.load > 1 {
			k := 1 / cond.load
			floor.Mean, floor.SD = before.Mean*k, before.SD*k
		}
		c.Tolerance, c.Effect = g.o.GoodputTolerance, -rel(after.Mean, floor.Mean)
		c.PValue = welchGreater(after, floor)
		worse = c.Effect > c.Tolerance
		if floor.Mean != before.Mean {
			c.Detail = fmt.Sprintf("%s %.3f -> %.3f against the %.3f the %s load rise explains (%+.1f%%, tolerance -%.0f%%, p=%.3g)",
				name, before.Mean, after.Mean, floor.Mean, times(cond.load), -100*c.Effect, 100*c.Tolerance, c.PValue)
		} else {
			c.Detail = fmt.Sprintf("%s %.3f -> %.3f (%+.1f%%, tolerance -%.0f%%, p=%.3g)", name, before.Mean, after.Mean, -100*c.Effect, 100*c.Tolerance, c.PValue)
		}
	}
	regressed := worse && c.PValue < g.o.Alpha
	var why []string // what keeps the verdict from standing
	switch {
	case m == GoodputShare || m == AdmittedShare:
		if !regressed && (cond.rose || cond.fell) {
			why = cond.loadNote()
		}
	case regressed:
		if cond.rose {
			why = cond.loadNote()
		}
		why = append(why, cond.after...)
	default:
		if cond.rose || cond.fell {
			why = cond.loadNote()
		}
		why = append(why, cond.any...)
	}
	switch {
	case len(why) > 0 && regressed:
		c.Verdict = Inconclusive
		c.Detail += "; not held against the version: " + strings.Join(why, "; ")
	case len(why) > 0:
		c.Verdict = Inconclusive
		c.Detail += "; cannot pass: " + strings.Join(why, "; ")
	case regressed:
		c.Verdict = Regression
	default:
		c.Verdict = Pass
	}
	return c
}

// loadNote names the load change, if any.
func (c conditions) loadNote() []string {
	switch {
	case c.rose:
		return []string{"offered load rose " + times(c.shift)}
	case c.fell:
		return []string{"offered load fell " + times(1/c.shift)}
	}
	return nil
}

// times formats a ratio as "2.30x".
func times(r float64) string { return fmt.Sprintf("%.2fx", r) }

func rel(after, before float64) float64 {
	if before <= 0 {
		if after > 0 {
			return math.Inf(1)
		}
		return 0
	}
	return after/before - 1
}

// rollBack rolls the regression d back and returns the watch with its
// decision: final when the rollback landed (also when the store answered
// with an error after storing it; the error is returned too) or is not to
// be made; open, with the failure in its reason, when it did not land, and
// then the next evaluation retries it (RollbackFrom refuses a second
// rollback of a version no longer active, so a retry never duplicates one).
func (g *Guard) rollBack(ctx context.Context, w watch, d Decision) (watch, error) {
	reason := d.Reason
	d.Verdict, d.Final = Regression, true
	w.retry = ""
	err := g.rollback(ctx, &d)
	if err != nil && d.RollbackVersion == 0 {
		d.Final = false
		d.Reason = reason + fmt.Sprintf(" (rollback failed, retried next cycle: %v)", err)
		w.retry = reason
	}
	w.d = d
	return w, err
}

// confirmTimeout bounds the read that tells whether a rollback the store
// answered with an error landed; it runs even when the cycle's context
// ended, as a deadline passing at commit leaves that unknown.
const confirmTimeout = 5 * time.Second

// rollback returns the service to the guarded version's parent. It returns
// an error when the store failed; d.RollbackVersion is then set when the
// rollback landed all the same (the store committed it and failed after, or
// its answer was lost to a deadline): the store may answer a version with
// an error whether or not it was stored, so what landed is read back.
func (g *Guard) rollback(ctx context.Context, d *Decision) error {
	if d.Parent == 0 {
		d.Reason += " (nothing to roll back to)"
		g.o.Events.Emit(ctx, events.Event{Kind: events.AutoRollback, Severity: events.Critical, At: d.At, Service: d.Service,
			Version: d.Version, Message: fmt.Sprintf("%s v%d regressed but has no version to roll back to", d.Service, d.Version), Detail: *d})
		return nil
	}
	// The cycle read the active versions before judging them, and a
	// person's rollback or publication may have replaced the version since
	// (or may land while this runs): rolling back to its parent then would
	// undo their decision. RollbackFrom checks, in the transaction that
	// would write, that the judged version is still the active one.
	reason := d.Reason
	if note := unjudgedNote(*d); note != "" {
		reason += "; " + note
	}
	v, err := g.o.Store.RollbackFrom(ctx, d.Service, d.Version, d.Parent, g.o.Actor, clip(reason, versioning.MaxReasonBytes))
	if err == nil {
		g.rolledBack(ctx, d, v, nil)
		return nil
	}
	var ce *versioning.ConflictError
	switch {
	case errors.As(err, &ce):
		// The version replaced may be this guardrail's own rollback of
		// it, from an attempt whose answer was lost.
		if rb, ferr := g.findRollback(ctx, *d); ferr == nil && rb.Number != 0 {
			g.rolledBack(ctx, d, rb, nil)
			return nil
		}
		d.Reason += fmt.Sprintf(" (not rolled back: v%d replaced it since)", ce.Active)
		return nil
	case errors.Is(err, versioning.ErrConflict) || errors.Is(err, versioning.ErrInvalidState):
		d.Reason += fmt.Sprintf(" (rollback not possible: %v)", err)
		return nil
	case errors.Is(err, versioning.ErrFenced):
		// This replica no longer leads (a later tick was claimed) and the
		// store wrote nothing: a rollback found now is the new leader's,
		// not this one's to report.
		return fmt.Errorf("guardrail: roll back %s v%d to v%d: %w", d.Service, d.Version, d.Parent, err)
	}
	err = fmt.Errorf("guardrail: roll back %s v%d to v%d: %w", d.Service, d.Version, d.Parent, err)
	rb, ferr := g.findRollback(ctx, *d)
	switch {
	case ferr != nil:
		return errors.Join(err, fmt.Errorf("guardrail: %s v%d: whether the rollback landed: %w", d.Service, d.Version, ferr))
	case rb.Number != 0:
		g.rolledBack(ctx, d, rb, err)
	}
	return err
}

// rolledBack records the rollback rb of d: its number, a log line and the
// auto_rollback event; storeErr is what the store answered although it
// stored rb.
func (g *Guard) rolledBack(ctx context.Context, d *Decision, rb versioning.Version, storeErr error) {
	d.RollbackVersion = rb.Number
	if note := unjudgedNote(*d); note != "" {
		d.Reason += "; " + note
	}
	if storeErr != nil {
		d.Reason += fmt.Sprintf(" (rolled back as v%d, though the store answered: %v)", rb.Number, storeErr)
	}
	g.o.Logger.Warn("guardrail rolled back", "service", d.Service, "version", d.Version, "to", d.Parent, "rollback", rb.Number, "reason", d.Reason)
	g.o.Events.Emit(ctx, events.Event{Kind: events.AutoRollback, Severity: events.Critical, At: d.At, Service: d.Service, Version: rb.Number,
		Message: fmt.Sprintf("%s v%d rolled back to v%d as v%d: %s", d.Service, d.Version, d.Parent, rb.Number, d.Reason), Detail: *d})
}

// findRollback reads the store for this guardrail's rollback of d's version
// to its parent (a rollback version whose parent is d.Version, a copy of
// d.Parent, by the guardrail's actor); the zero Version when there is none.
func (g *Guard) findRollback(ctx context.Context, d Decision) (versioning.Version, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), confirmTimeout)
	defer cancel()
	vs, err := g.o.Store.List(ctx, versioning.ListFilter{Service: d.Service, Limit: 100})
	if err != nil {
		return versioning.Version{}, err
	}
	for _, v := range vs {
		if v.Number > d.Version && v.Parent == d.Version && v.RollbackOf == d.Parent && v.Source == versioning.SourceRollback &&
			versioning.SamePerson(v.Author, g.o.Actor.Name) {
			return v, nil
		}
	}
	return versioning.Version{}, nil
}

// Watching reports whether the active version of a service is still being
// judged (live, or after the fact when it was live for longer than Settle +
// MaxWait when first seen); the engine proposes no further change
// meanwhile, so every version gets its own verdict.
func (g *Guard) Watching(service string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.watches[service]
	return w != nil && !w.d.Final
}

// Decisions returns the open watches and the kept final decisions, newest
// first.
func (g *Guard) Decisions() []Decision {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]Decision, 0, len(g.watches)+len(g.done))
	for _, w := range g.watches {
		if !w.d.Final {
			out = append(out, w.d)
		}
	}
	for i := len(g.done) - 1; i >= 0; i-- {
		out = append(out, g.done[i])
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.After(out[j].At) })
	return out
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
