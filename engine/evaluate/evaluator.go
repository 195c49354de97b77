package evaluate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/engine/guardrail"
	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/recommend"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/rules/distribution"
	"governor.dev/governor/rules/versioning"
)

// ErrInvalidOption marks bad options.
var ErrInvalidOption = errors.New("evaluate: invalid option")

// ErrMetricsFailed: a signal's query failed in the cycle (the store timed
// out or refused it, or its template does not aggregate by service); the
// cycle proposed nothing. Tick's error wraps it, naming the first failed
// signal and how many failed.
var ErrMetricsFailed = errors.New("evaluate: metrics failed, nothing proposed")

// Fleet lists the instances the delivery ledger knows; *distribution.Ledger
// implements it.
type Fleet interface {
	Instances(ctx context.Context, service string) ([]distribution.Instance, error)
}

// Options wire an Evaluator. Reader, Tracker, Recommender and Versions are
// required; without Proposer the cycle only recommends (a dry run, as in a
// backtest), without Guard nothing is guarded, without Fleet every service
// counts as having one instance.
type Options struct {
	Reader      *signals.Reader
	Tracker     *loadscore.Tracker
	Recommender *recommend.Recommender
	Versions    versioning.Reader
	Proposer    *recommend.Proposer
	Guard       *guardrail.Guard
	Fleet       Fleet
	// Breakers, if set, is queried every cycle for open circuit breakers
	// (governor_sdk_breaker_state == 2), emitting breaker_open when one
	// opens, and, with a Guard, for the p99 latency of every downstream
	// (slow downstreams are guardrail incidents), which a
	// signals.SeriesSource answers from its samples.
	Breakers signals.Source
	// Audit is read for emergency publications (events.EmergencyPublish);
	// default Versions when it implements versioning.Auditor (every
	// versioning.Store does), otherwise none are reported.
	Audit versioning.Auditor
	// Watermark records how far emergency publications were reported,
	// shared by the replicas (SQLWatermark); default in memory.
	Watermark Watermark
	// Since is when this engine started watching the rules store: while
	// the watermark was never set, only emergency publications at or after
	// Since are reported. Default: the time of the first Tick.
	Since time.Time
	// Levels, if set, alerts on each service's p99 latency and error
	// ratio against its alert levels (events.LevelCrossed, LevelCleared).
	Levels *AlertLevels
	// Band returns a service's band; default recommend.DefaultBand.
	Band func(service string) recommend.Band
	// ForgetAfter is how long a service may be absent from every cycle's
	// signals before the engine forgets it: the recommender's state (its
	// ceiling controller, count of known scores and healthy baseline,
	// learned alert levels included), its load-score state, its last
	// score and recommendation, its alert levels still raised (each
	// resolved with a level_cleared event) and its rows in the saved state
	// (see State); the guardrail stops looking at its active version. A
	// service back within it continues where it stopped. Only a cycle
	// whose signal read is whole (no query failed or partial) forgets: a
	// metrics outage forgets nothing. Default 1h, the
	// age beyond which State does not restore what a cycle saved either
	// (StateOptions.MaxAge); must not be negative.
	ForgetAfter time.Duration
	// ReportingGrace is how long after the delivery ledger first hears
	// from an instance its metrics may still be missing (its target not
	// yet discovered and scraped): until then it is not expected among
	// the instances reporting (see "Partial data" in the package
	// documentation). Default 1m (DefaultReportingGrace), the signals'
	// default rate window, four 15s scrape intervals; it should cover the
	// time from an instance's start to its first scrape. Must not be
	// negative.
	ReportingGrace time.Duration
	Events         events.Sink
	Logger         *slog.Logger
	Registerer     prometheus.Registerer
}

// Result is what one cycle saw and did.
type Result struct {
	At              time.Time                  `json:"at"`
	Scores          []loadscore.Score          `json:"scores"`
	Recommendations []recommend.Recommendation `json:"recommendations"`
	Submitted       []recommend.Submitted      `json:"submitted"`
	Decisions       []guardrail.Decision       `json:"decisions"`
	Errors          []string                   `json:"errors,omitempty"`
	// Partial lists the reads of the cycle that answered with a warning
	// that data may be missing (signals.PartialData), each as "metrics
	// partial: <query>: <warning>", then the guardrail's own range reads
	// that did (guardrail.Guard.Partial). Nothing is proposed for a
	// service whose signals are partial (its recommendation says why).
	Partial []string `json:"partial,omitempty"`
	// GuardrailHeld says why the guardrail judged nothing this cycle: a
	// signal it judges by was partial (see guardSignals), or a read of the
	// incidents it must not blame on a version was partial or failed
	// ("incident read failed: <error>"); a watch held so until the
	// guardrail's MaxWait ends inconclusive (guardrail.Guard.Hold), in
	// Decisions. Empty when it judged; a
	// partial range read of its own holds only the watches it covers
	// (listed in Partial, each held decision's reason says so).
	GuardrailHeld string `json:"guardrail_held,omitempty"`
}

// Evaluator runs cycles. Tick is not meant to run concurrently with itself;
// the read accessors are safe at any time.
type Evaluator struct {
	o       Options
	mu      sync.Mutex
	scores  map[string]loadscore.Score
	recs    map[string]recommend.Recommendation
	active  map[string]versioning.Version // cache by service, Tick's goroutine only
	states  map[string]distribution.State // ledger state by service/instance, Tick's goroutine only
	open    map[string]bool               // open breakers by service/downstream, Tick's goroutine only
	latency map[string]*latencyBaseline   // downstream p99 baselines by service/downstream, Tick's goroutine only
	seen    map[string]time.Time          // last cycle each service had signals, Tick's goroutine only
	first   map[string]time.Time          // when the ledger first heard from each live service/instance (liveInstances), Tick's goroutine only
	since   time.Time                     // see Options.Since
	last    time.Time
	metrics metrics
	// incidentsPartial are the partial-data warnings of the cycle's
	// incident reads (breakers, downstream latency), Tick's goroutine only.
	incidentsPartial []string
	// incidentsFailed is why the cycle's first failed incident read
	// failed ("" when none did), Tick's goroutine only.
	incidentsFailed string
	// held are the services the last cycle did not forget because its
	// read was incomplete (logged when they change), Tick's goroutine only.
	held []string
	// warned is when each distinct set of read warnings was last logged
	// (logReadWarnings), Tick's goroutine only.
	warned map[string]time.Time
}

type metrics struct {
	ticks     prometheus.Counter
	duration  prometheus.Histogram
	score     *prometheus.GaugeVec
	proposals *prometheus.CounterVec
	rollbacks prometheus.Counter
	partial   prometheus.Counter
	failed    prometheus.Counter
}

// New checks the options and returns an Evaluator.
func New(o Options) (*Evaluator, error) {
	var errs []error
	for name, missing := range map[string]bool{"Reader": o.Reader == nil, "Tracker": o.Tracker == nil,
		"Recommender": o.Recommender == nil, "Versions": o.Versions == nil} {
		if missing {
			errs = append(errs, fmt.Errorf("%w: %s is required", ErrInvalidOption, name))
		}
	}
	if o.Levels != nil {
		errs = append(errs, o.Levels.Validate())
	}
	if o.ForgetAfter < 0 {
		errs = append(errs, fmt.Errorf("%w: ForgetAfter is %s, must not be negative", ErrInvalidOption, o.ForgetAfter))
	}
	if o.ReportingGrace < 0 {
		errs = append(errs, fmt.Errorf("%w: ReportingGrace is %s, must not be negative", ErrInvalidOption, o.ReportingGrace))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if o.Band == nil {
		o.Band = func(string) recommend.Band { return recommend.DefaultBand() }
	}
	if o.ForgetAfter == 0 {
		o.ForgetAfter = DefaultForgetAfter
	}
	if o.ReportingGrace == 0 {
		o.ReportingGrace = DefaultReportingGrace
	}
	if o.Events == nil {
		o.Events = events.Discard{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	f := promauto.With(o.Registerer)
	m := metrics{
		ticks: f.NewCounter(prometheus.CounterOpts{Name: "governor_engine_ticks_total", Help: "Evaluation cycles run."}),
		duration: f.NewHistogram(prometheus.HistogramOpts{Name: "governor_engine_tick_duration_seconds",
			Help: "Duration of one evaluation cycle.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}),
		score: f.NewGaugeVec(prometheus.GaugeOpts{Name: "governor_engine_load_score",
			Help: "Smoothed load score per service (absent when unknown)."}, []string{"service"}),
		proposals: f.NewCounterVec(prometheus.CounterOpts{Name: "governor_engine_proposals_total",
			Help: "Recommendations submitted, by outcome: auto_applied, proposed, revised (an open proposal's ruleset), unchanged, failed."}, []string{"outcome"}),
		rollbacks: f.NewCounter(prometheus.CounterOpts{Name: "governor_engine_rollbacks_total", Help: "Automatic rollbacks by the guardrail."}),
		partial: f.NewCounter(prometheus.CounterOpts{Name: "governor_engine_partial_reads_total",
			Help: "Evaluation cycles whose metrics reads warned that data may be missing: nothing proposed for the services concerned, the guardrail held when its signals were concerned."}),
		failed: f.NewCounter(prometheus.CounterOpts{Name: "governor_engine_failed_reads_total",
			Help: "Evaluation cycles in which a signal's query failed (ErrMetricsFailed): nothing proposed for any service."}),
	}
	for _, oc := range []string{"auto_applied", "proposed", "revised", "unchanged", "failed"} {
		m.proposals.WithLabelValues(oc)
	}
	return &Evaluator{o: o, scores: map[string]loadscore.Score{}, recs: map[string]recommend.Recommendation{},
		active: map[string]versioning.Version{}, seen: map[string]time.Time{}, since: o.Since, metrics: m}, nil
}

// DefaultForgetAfter is the default of Options.ForgetAfter.
const DefaultForgetAfter = time.Hour

// DefaultReportingGrace is the default of Options.ReportingGrace.
const DefaultReportingGrace = time.Minute

// forgetAfter is Options.ForgetAfter, its default if unset.
func (e *Evaluator) forgetAfter() time.Duration {
	if e.o.ForgetAfter > 0 {
		return e.o.ForgetAfter
	}
	return DefaultForgetAfter
}

// Tick runs one cycle at time at. Per-service failures are collected in
// Result.Errors and joined into the error; the other services still run.
// A write the rules store (or the emergency watermark, SQLWatermark)
// refuses because a later tick was claimed (versioning.ErrFenced: ctx
// carries the fence of a tick this replica no longer leads) ends the
// cycle's writes: nothing more is judged, rolled back or submitted.
// A rules store that cannot list its services stops the guardrail and the
// recommendations for the cycle, not its scores and level alerts.
// A ctx that ends later (the lead lost, the deadline reached) ends its
// submissions: the error says so once, with context.Cause(ctx), and none
// of them counts as a failed proposal (governor_engine_proposals_total).
// A ctx that ends during the signal read (the cycle's deadline) ends the
// cycle before it updates anything: the error wraps context.Cause(ctx),
// and no score, controller, alert level or guardrail sample moves on
// signals that read as unknown only because their queries were cut short.
func (e *Evaluator) Tick(ctx context.Context, at time.Time) (Result, error) {
	start := time.Now()
	defer func() { e.metrics.duration.Observe(time.Since(start).Seconds()) }()
	e.metrics.ticks.Inc()
	res := Result{At: at}
	var errs []error
	e.incidentsPartial, e.incidentsFailed = nil, ""
	snap, err := e.o.Reader.Read(ctx, at, signals.PerService)
	if ctx.Err() != nil {
		// The cycle ended (its deadline, a shutdown, a lost lead) while
		// the signals were read: the queries it cut short read as unknown,
		// and would move the load-score smoothing and the controllers as
		// if the signals were missing. Nothing is updated; the next cycle
		// reads afresh.
		return res, fmt.Errorf("evaluate: cycle ended during the signal read, nothing updated: %w", context.Cause(ctx))
	}
	if err != nil {
		return res, fmt.Errorf("evaluate: read signals: %w", err)
	}
	e.logReadWarnings(at, snap.Warnings)
	partial := partialServices(snap)
	readFailed := failedRead(snap)
	if readFailed != "" {
		e.metrics.failed.Inc()
		errs = append(errs, fmt.Errorf("%w: %s (%d of the cycle's signal queries failed)", ErrMetricsFailed,
			strings.TrimPrefix(readFailed, failedPrefix), len(snap.Errors)))
	}
	scores := e.o.Tracker.Update(snap)
	if e.o.Guard != nil {
		// The guardrail's samples at this tick, when it lies on its grid:
		// the windows it judges need no query for them.
		e.o.Guard.Record(snap)
	}
	incidents, err := e.breakers(ctx, at)
	if err != nil {
		errs = append(errs, err)
	}
	if slow, err := e.slowDownstreams(ctx, at); err != nil {
		errs = append(errs, err)
	} else {
		incidents = append(incidents, slow...)
	}
	live, heard, err := e.liveInstances(ctx, at)
	if err != nil {
		errs = append(errs, err)
	} else if e.o.Guard != nil && heard != nil {
		e.o.Guard.NoteHeartbeats(heard)
	}
	res.Partial = e.partialReads(snap)
	if len(res.Partial) > 0 {
		e.metrics.partial.Inc()
	}
	// The active versions first: the guardrail judges them (and may roll
	// back) before anything new is proposed on top of them.
	actives := make(map[string]*versioning.Version, len(scores))
	var active []versioning.Version
	infos, err := e.o.Versions.Services(ctx)
	if err != nil {
		// The rules store is down: nothing can be judged or proposed, but
		// the readings are current. They still alert (a level alert not
		// refreshed would resolve while the reading stays above it) and
		// the scores are shown.
		errs = append(errs, fmt.Errorf("evaluate: services: %w", err))
		e.o.Levels.check(ctx, at, snap.Entries, e.o.Recommender.Thresholds, e.o.Events)
		return e.publish(ctx, res, snap, scores, errs)
	}
	current := make(map[string]int64, len(infos))
	for _, in := range infos {
		current[in.Name] = in.Active
	}
	if e.since.IsZero() {
		e.since = at
	}
	// fenced: a write of this cycle was refused because a later tick was
	// claimed (versioning.ErrFenced): this replica no longer leads, and
	// the cycle's other writes would be refused too.
	fenced := false
	failed, emErrs := e.emergencies(ctx, at, infos)
	errs = append(errs, emErrs...)
	for _, err := range emErrs {
		fenced = fenced || errors.Is(err, versioning.ErrFenced)
	}
	for _, svc := range e.judged(scores, infos) {
		n := current[svc]
		if n == 0 || failed[svc] {
			continue
		}
		v, ok := e.active[svc]
		if !ok || v.Number != n {
			// Versions are immutable: fetch a service's active version
			// only when its number changed.
			if v, err = e.o.Versions.Get(ctx, svc, n); err != nil {
				errs = append(errs, fmt.Errorf("evaluate: %s: active version v%d: %w", svc, n, err))
				continue
			}
			e.active[svc] = v
		}
		actives[svc] = &v
		active = append(active, v)
	}
	// rolledBack are the services the guardrail rolled back this cycle:
	// their rollback is watched from the next cycle on, and nothing is
	// proposed on top of it before (a version made now would replace it
	// unwatched, and be judged against the window of the regression).
	rolledBack := map[string]guardrail.Decision{}
	// ended: the cycle's context ended (its lead lost, its tick_timeout
	// reached) before or during a submission: nothing more is submitted,
	// and what it cut short is no failed proposal.
	ended := false
	endCycle := func() {
		ended = true
		errs = append(errs, fmt.Errorf("evaluate: cycle ended, nothing more submitted: %w", context.Cause(ctx)))
	}
	if e.o.Guard != nil {
		// What the guardrail must not blame on a version.
		e.o.Guard.Note(at, append(incidents, overloadedDependencies(scores, active)...))
		res.GuardrailHeld = e.guardHold(snap)
		switch {
		case fenced:
			// Not leading: what the guardrail would decide is the
			// successor's to decide.
		case res.GuardrailHeld != "":
			// Nothing judged or rolled back; a watch held until MaxWait
			// ends inconclusive, as when the guardrail's own reads stay
			// partial.
			e.o.Logger.Warn("guardrail held: nothing judged or rolled back this cycle", "tick", at, "reason", res.GuardrailHeld)
			dec, err := e.o.Guard.Hold(ctx, at, active, res.GuardrailHeld)
			if err != nil {
				errs = append(errs, err)
				fenced = fenced || errors.Is(err, versioning.ErrFenced)
			}
			res.Decisions = dec
		default:
			dec, err := e.o.Guard.Observe(ctx, at, active)
			if err != nil {
				errs = append(errs, err)
				fenced = fenced || errors.Is(err, versioning.ErrFenced)
			}
			if held := e.o.Guard.Partial(); len(held) > 0 {
				// Its own range reads warned: the watches they cover were
				// held (the guardrail logs which), the others judged.
				if len(res.Partial) == 0 {
					e.metrics.partial.Inc()
				}
				res.Partial = append(res.Partial, held...)
			}
			for _, d := range dec {
				if d.RollbackVersion == 0 {
					continue
				}
				rolledBack[d.Service] = d
				e.metrics.rollbacks.Inc()
				if v, err := e.o.Versions.Active(ctx, d.Service); err == nil {
					actives[d.Service] = &v
					e.active[d.Service] = v
				}
			}
			res.Decisions = dec
		}
	}
	for _, sc := range scores {
		svc := sc.Key.Service
		in := recommend.Input{At: at, Service: svc, Score: sc, Entry: snap.Entries[sc.Key], Instances: live[svc].live,
			Band: e.o.Band(svc), Active: actives[svc]}
		if e.o.Fleet == nil {
			in.Instances = 1
		}
		rec := e.o.Recommender.Evaluate(in)
		if rec.Ruleset != nil && e.o.Guard != nil && e.o.Guard.Watching(svc) {
			rec.Reason = "held while the guardrail judges v" + fmt.Sprint(in.Active.Number) + ": " + rec.Reason
			rec.Ruleset = nil
		}
		if d, ok := rolledBack[svc]; ok && rec.Ruleset != nil {
			rec.Reason = fmt.Sprintf("held: the guardrail rolled back v%d as v%d this cycle, judged from the next: %s", d.Version, d.RollbackVersion, rec.Reason)
			rec.Ruleset = nil
		}
		if why, ok := partial[svc]; ok || readFailed != "" {
			// The signals may lack series, or a signal's query failed
			// (the load score then leaves its term out): whatever they
			// suggest is not proposed.
			if !ok {
				why = readFailed
			}
			rec.Reason = why + "; " + rec.Reason
			rec.Ruleset, rec.Inconclusive = nil, true
		}
		if why := fewerReporting(in, rec, live[svc], e.o.ReportingGrace); why != "" {
			// Some live instances past joining were not scraped: the
			// summed rate lacks their traffic, and a cut would follow it.
			rec.Reason = why + "; " + rec.Reason
			rec.Ruleset, rec.Inconclusive = nil, true
		}
		res.Recommendations = append(res.Recommendations, rec)
		if rec.Ruleset != nil && e.o.Proposer != nil && !fenced && !ended {
			if ctx.Err() != nil {
				// The cycle ended (its lead lost, its deadline): every
				// submission left would fail with it.
				endCycle()
				continue
			}
			sub, err := e.o.Proposer.Submit(ctx, rec, in.Band)
			switch {
			case err != nil && ctx.Err() != nil:
				// Cut short by the cycle's end, not a failed proposal.
				endCycle()
			case err != nil:
				e.metrics.proposals.WithLabelValues("failed").Inc()
				errs = append(errs, err)
				fenced = errors.Is(err, versioning.ErrFenced)
			case sub.Unchanged:
				e.metrics.proposals.WithLabelValues("unchanged").Inc()
			case sub.AutoApplied:
				e.metrics.proposals.WithLabelValues("auto_applied").Inc()
				res.Submitted = append(res.Submitted, sub)
				e.o.Events.Emit(ctx, events.Event{Kind: events.AutoApply, Severity: events.Info, At: at, Service: svc,
					Version: sub.Version.Number, Message: fmt.Sprintf("%s v%d applied itself: %s", svc, sub.Version.Number, sub.Version.Reason)})
			case sub.Revised:
				// The open proposal's ruleset moved: same number, a new
				// revision, approvals given on the old one no longer count.
				e.metrics.proposals.WithLabelValues("revised").Inc()
				res.Submitted = append(res.Submitted, sub)
				e.o.Events.Emit(ctx, events.Event{Kind: events.Proposal, Severity: events.Info, At: at, Service: svc,
					Version: sub.Version.Number, Message: fmt.Sprintf("%s v%d revised (revision %d), waits for approval (%s): %s",
						svc, sub.Version.Number, sub.Version.Revision, sub.Policy, rec.Reason)})
			default:
				e.metrics.proposals.WithLabelValues("proposed").Inc()
				res.Submitted = append(res.Submitted, sub)
				e.o.Events.Emit(ctx, events.Event{Kind: events.Proposal, Severity: events.Info, At: at, Service: svc,
					Version: sub.Version.Number, Message: fmt.Sprintf("%s v%d proposed, waits for approval (%s): %s", svc, sub.Version.Number, sub.Policy, rec.Reason)})
			}
		}
	}
	e.o.Levels.check(ctx, at, snap.Entries, e.o.Recommender.Thresholds, e.o.Events)
	return e.publish(ctx, res, snap, scores, errs)
}

// judged lists the services whose active versions the cycle reads: those
// with signals, in the order of their scores, then, with a Guard, by name,
// those with an active version and no signals now that had some within
// ForgetAfter, whose version the guardrail still judges, or whose active
// version the cycle has not read before (an engine that starts or takes
// the lead after a service stopped reporting). A version after which no
// instance reports any more is thus still judged (see
// guardrail.Guard.NoteHeartbeats) rather than dropped unseen, across a
// restart too.
func (e *Evaluator) judged(scores []loadscore.Score, infos []versioning.ServiceInfo) []string {
	out := make([]string, 0, len(scores))
	present := make(map[string]bool, len(scores))
	for _, sc := range scores {
		out = append(out, sc.Key.Service)
		present[sc.Key.Service] = true
	}
	if e.o.Guard == nil {
		return out
	}
	var absent []string
	for _, in := range infos {
		if in.Active == 0 || present[in.Name] {
			continue
		}
		// A version this engine has not read yet (it started, or took the
		// lead, after the service stopped reporting; or the version went
		// live while it was silent) is handed to the guardrail once, which
		// judges it (live, or after the fact when it went live longer ago,
		// up to guardrail.Options.Recover) and holds proposals meanwhile.
		v, read := e.active[in.Name]
		if _, ok := e.seen[in.Name]; ok || !read || v.Number != in.Active || e.o.Guard.Watching(in.Name) {
			absent = append(absent, in.Name)
		}
	}
	slices.Sort(absent)
	return append(out, absent...)
}

// publish makes a cycle's scores and recommendations the ones the read
// accessors and the load score gauge show, and returns the cycle's result
// with its errors. A service absent from the cycle has no current score:
// its gauge goes at once (an alert on it must not fire on a service that is
// gone), and its last score and recommendation are dropped once the tracker
// forgets it too (loadscore.Options.MaxGap). A service absent for longer
// than ForgetAfter is forgotten altogether (see forget), but only by a
// cycle whose read of snap was whole (see incomplete).
func (e *Evaluator) publish(ctx context.Context, res Result, snap *signals.Snapshot, scores []loadscore.Score, errs []error) (Result, error) {
	at := res.At
	res.Scores = scores
	if e.seen == nil {
		e.seen = map[string]time.Time{}
	}
	for _, sc := range scores {
		e.seen[sc.Key.Service] = at
	}
	gone, held := e.gone(at), []string(nil)
	if len(gone) > 0 {
		if why := incomplete(snap); why != "" {
			// The read may lack the series of services that still run:
			// their absence is not news, and forgetting them would resolve
			// their alerts during a metrics outage.
			if !slices.Equal(gone, e.held) {
				e.o.Logger.Info("services absent for over ForgetAfter not forgotten: the metrics read is incomplete",
					"tick", at, "services", gone, "reason", why)
			}
			held, gone = gone, nil
		}
	}
	e.held = held
	for _, svc := range gone {
		e.forget(ctx, at, svc)
	}
	for _, sc := range scores {
		if sc.Known {
			e.metrics.score.WithLabelValues(sc.Key.Service).Set(sc.Value)
		} else {
			e.metrics.score.DeleteLabelValues(sc.Key.Service)
		}
	}
	gap := e.o.Tracker.Options().MaxGap
	e.mu.Lock()
	for _, sc := range scores {
		e.scores[sc.Key.Service] = sc
	}
	for _, r := range res.Recommendations {
		e.recs[r.Service] = r
	}
	for svc, sc := range e.scores {
		if sc.At.Equal(at) {
			continue
		}
		e.metrics.score.DeleteLabelValues(svc)
		if at.Sub(sc.At) > gap {
			delete(e.scores, svc)
			delete(e.recs, svc)
		}
	}
	e.last = at
	e.mu.Unlock()
	for _, err := range errs {
		res.Errors = append(res.Errors, err.Error())
	}
	return res, errors.Join(errs...)
}

// incomplete says why a snapshot cannot tell a service that is gone from one
// whose series the read lost ("" when it can): a signal's query failed or
// answered with a warning that data may be missing. A service absent from
// any answer of a whole read has no series; absent from an incomplete
// one, it may have them in a store that did not answer.
func incomplete(snap *signals.Snapshot) string {
	if why := failedRead(snap); why != "" {
		return why
	}
	if len(snap.Partial) > 0 {
		s := slices.Min(slices.Collect(maps.Keys(snap.Partial)))
		return partialPrefix + string(s) + ": " + snap.Partial[s]
	}
	return ""
}

// failedPrefix begins every reason given for a failed signal query.
const failedPrefix = "metrics failed: "

// failedRead says which signal's query failed in snap, and how ("metrics
// failed: <signal>: <error>", the first signal by name), or "". Every
// proposal of such a cycle is held: the load score leaves the failed term
// out and spreads its weight over the others, which suits a signal a
// service does not export, not a store that timed out or a template that
// does not aggregate, and a proposal inside the auto-apply band would
// apply itself on a score missing its latency or in-flight term.
func failedRead(snap *signals.Snapshot) string {
	if len(snap.Errors) == 0 {
		return ""
	}
	s := slices.Min(slices.Collect(maps.Keys(snap.Errors)))
	return failedPrefix + string(s) + ": " + snap.Errors[s].Error()
}

// gone lists, by name, the services to forget at time at: those without
// signals for longer than ForgetAfter, and those with an alert level
// raised that this replica never saw (restored from the state) and last
// reported longer than ForgetAfter ago.
func (e *Evaluator) gone(at time.Time) []string {
	var out []string
	for svc, last := range e.seen {
		if at.Sub(last) > e.forgetAfter() {
			out = append(out, svc)
		}
	}
	if e.o.Levels != nil {
		var unseen map[string]time.Time // the last report of each, when any
		for k, last := range e.o.Levels.raised {
			if _, ok := e.seen[k.service]; !ok && last.After(unseen[k.service]) {
				if unseen == nil {
					unseen = map[string]time.Time{}
				}
				unseen[k.service] = last
			}
		}
		for svc, last := range unseen {
			if at.Sub(last) > e.forgetAfter() {
				out = append(out, svc)
			}
		}
	}
	slices.Sort(out)
	return out
}

// forget drops everything the evaluator keeps of a service that reported
// nothing for ForgetAfter: its alert levels still raised, resolved with a
// level_cleared each (before the recommender forgets the baseline that
// learned levels come from, so the event still names the level), then the
// rest as drop does. State saves no more of it and marks its saved
// baseline forgotten (see State.Save).
func (e *Evaluator) forget(ctx context.Context, at time.Time, svc string) {
	e.o.Levels.forget(ctx, at, svc, e.forgetAfter(), e.o.Recommender.Thresholds, e.o.Events)
	e.drop(svc)
}

// drop removes what the evaluator keeps of a service, its alert levels
// still raised aside (forget resolves them, forgotten drops them):
// its recommender state (controller and healthy baseline), its load-score
// smoothing and hysteresis (loadscore.Tracker.Forget, even when the
// tracker's MaxGap is longer), the active version read, when it was last
// seen, its load score gauge and its last score and recommendation.
func (e *Evaluator) drop(svc string) {
	e.o.Recommender.Forget(svc)
	e.o.Tracker.Forget(svc)
	delete(e.seen, svc)
	delete(e.active, svc)
	e.metrics.score.DeleteLabelValues(svc)
	e.mu.Lock()
	delete(e.scores, svc)
	delete(e.recs, svc)
	e.mu.Unlock()
}

// breakerQuery counts, per service and downstream, the instances whose
// breaker is open.
const breakerQuery = `count by (service, downstream) (governor_sdk_breaker_state == 2)`

// breakers emits breaker_open for every downstream whose breaker opened
// since the last cycle, and returns the open ones as incidents for the
// guardrail. A partial answer (signals.PartialData) holds the guardrail
// for the cycle and closes no breaker; a failed read holds it too (an open
// breaker it could not see must not be blamed on a version) and closes
// none.
func (e *Evaluator) breakers(ctx context.Context, at time.Time) ([]guardrail.Incident, error) {
	if e.o.Breakers == nil {
		return nil, nil
	}
	res, err := e.o.Breakers.Query(ctx, breakerQuery, at)
	if err != nil {
		return nil, e.incidentFailed(fmt.Errorf("evaluate: breakers: %w", err))
	}
	partial := e.incidentRead("breakers", res)
	now := make(map[string]bool, len(res.Samples))
	var incidents []guardrail.Incident
	for _, s := range res.Samples {
		svc, ds := s.Labels["service"], s.Labels["downstream"]
		key := svc + "/" + ds
		now[key] = true
		msg := fmt.Sprintf("%s: the breaker to %s is open on %.0f instance(s)", svc, ds, s.V)
		if !e.open[key] {
			e.o.Events.Emit(ctx, events.Event{Kind: events.BreakerOpen, Severity: events.Warning, At: at, Service: svc, Message: msg})
		}
		incidents = append(incidents, guardrail.Incident{Service: svc, Kind: string(events.BreakerOpen), Downstream: ds,
			What: fmt.Sprintf("the breaker to %s is open on %.0f instance(s)", ds, s.V)})
	}
	if partial {
		// A breaker the answer lacks may be open still: it is not
		// reported again when the read is whole.
		for key := range e.open {
			now[key] = true
		}
	}
	e.open = now
	return incidents, nil
}

// liveInstances counts each service's instances that are not GONE and
// those of them expected to report metrics (see expectedReporting),
// returns the newest heartbeat or report of any of each service's
// instances (nil without a Fleet), and emits instance_stale when an
// instance turns STALE or NACKED and instance_recovered when it no longer
// is.
func (e *Evaluator) liveInstances(ctx context.Context, at time.Time) (map[string]fleetCount, map[string]time.Time, error) {
	out := map[string]fleetCount{}
	if e.o.Fleet == nil {
		return out, nil, nil
	}
	ins, err := e.o.Fleet.Instances(ctx, "")
	if err != nil {
		return out, nil, fmt.Errorf("evaluate: ledger: %w", err)
	}
	seen := make(map[string]distribution.State, len(ins))
	first := make(map[string]time.Time, len(ins))
	heard := map[string]time.Time{}
	for _, in := range ins {
		key := in.Service + "/" + in.Instance
		if in.State != distribution.StateGone {
			// When the ledger first heard from the instance: its Since
			// when this evaluator first saw it (an instance's first
			// state begins with its first message), kept while it stays
			// live (Since moves with every later change of state).
			f, ok := e.first[key]
			if !ok {
				f = in.Since
			}
			first[key] = f
			c := out[in.Service]
			c.live++
			if expectedReporting(in, f, at, e.o.ReportingGrace) {
				c.expected++
			}
			out[in.Service] = c
		}
		if in.LastSeen.After(heard[in.Service]) {
			heard[in.Service] = in.LastSeen
		}
		seen[key] = in.State
		bad := badState(in.State)
		if prev, ok := e.states[key]; bad && (!ok || prev != in.State) {
			e.o.Events.Emit(ctx, events.Event{Kind: events.InstanceStale, Severity: events.Warning, At: at, Service: in.Service,
				Version: in.Target, Message: behindMessage(in), Detail: in})
		}
	}
	var recovered []string
	for key, prev := range e.states {
		if now, ok := seen[key]; badState(prev) && (!ok || !badState(now)) {
			recovered = append(recovered, key)
		}
	}
	slices.Sort(recovered)
	var current map[string]distribution.Instance // the ledger records of the recovered, when any
	if len(recovered) > 0 {
		current = make(map[string]distribution.Instance, len(recovered))
		for _, in := range ins {
			if key := in.Service + "/" + in.Instance; !badState(in.State) && badState(e.states[key]) {
				current[key] = in
			}
		}
	}
	for _, key := range recovered {
		prev := e.states[key]
		now, ok := seen[key]
		var in distribution.Instance
		state := string(now)
		if ok {
			in = current[key]
		} else {
			in.Service, in.Instance, _ = strings.Cut(key, "/")
			state = "no longer in the ledger"
		}
		e.o.Events.Emit(ctx, events.Event{Kind: InstanceRecovered, Severity: events.Info, At: at, Service: in.Service,
			Version: in.Running, Message: fmt.Sprintf("%s instance %s recovered from %s: %s", in.Service, in.Instance, prev, state),
			Detail: Recovery{Instance: in, From: prev}})
	}
	e.states, e.first = seen, first
	return out, heard, nil
}

// InstanceRecovered is events.InstanceRecovered; its Detail is a Recovery.
const InstanceRecovered = events.InstanceRecovered

// Recovery is the Detail of an InstanceRecovered event.
type Recovery = events.Recovery

// behindMessage says why an instance is not on its target: its state, the
// versions it runs and should run, and for a NACKED one what it refused,
// or that it runs other content of its version than the store's.
func behindMessage(in distribution.Instance) string {
	msg := fmt.Sprintf("%s instance %s is %s: runs v%d, meant to run v%d", in.Service, in.Instance, in.State, in.Running, in.Target)
	switch {
	case in.State == distribution.StateNacked && in.NackReason == distribution.NackOtherContent:
		msg += " (" + in.NackError + ")" // "runs other content of version N: …"
	case in.State == distribution.StateNacked:
		msg += fmt.Sprintf(" (refused v%d: %s %s)", in.NackVersion, in.NackReason, in.NackError)
	}
	return msg
}

func badState(s distribution.State) bool {
	return s == distribution.StateStale || s == distribution.StateNacked
}

// Scores returns the latest score of every service, by name; a service
// absent from the cycles for longer than the tracker's MaxGap is left out.
func (e *Evaluator) Scores() []loadscore.Score {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]loadscore.Score, 0, len(e.scores))
	for _, s := range e.scores {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key.Service < out[j].Key.Service })
	return out
}

// Recommendations returns the latest recommendation of every service.
func (e *Evaluator) Recommendations() []recommend.Recommendation {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]recommend.Recommendation, 0, len(e.recs))
	for _, r := range e.recs {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Service < out[j].Service })
	return out
}

// LastTick is the time of the latest cycle (zero before the first).
func (e *Evaluator) LastTick() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.last
}

// warnEvery is how often one distinct set of read warnings is logged, and
// maxWarningsLogged how many of a set the log line lists.
const (
	warnEvery         = 10 * time.Minute
	maxWarningsLogged = 20
)

// logReadWarnings logs the non-fatal warnings of the cycle's signal read
// (signals.Snapshot.Warnings: a sample lacking its scope's labels, say),
// each distinct set at most once per warnEvery of cycle time.
func (e *Evaluator) logReadWarnings(at time.Time, warnings []string) {
	if len(warnings) == 0 {
		return
	}
	set := slices.Compact(slices.Sorted(slices.Values(warnings)))
	key := strings.Join(set, "\n")
	for k, t := range e.warned {
		if at.Sub(t) >= warnEvery || t.After(at) {
			delete(e.warned, k)
		}
	}
	if _, ok := e.warned[key]; ok {
		return
	}
	if e.warned == nil {
		e.warned = map[string]time.Time{}
	}
	e.warned[key] = at
	shown := set[:min(len(set), maxWarningsLogged)]
	e.o.Logger.Warn("metrics read warnings (signals still used; this set is logged again at most every 10m)",
		"tick", at, "warnings", shown, "distinct", len(set), "not_shown", len(set)-len(shown))
}
