package signals

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/common/model"
)

// ReaderOptions configures a Reader. Zero fields take the defaults of
// DefaultReaderOptions.
type ReaderOptions struct {
	// Templates overrides default templates by signal name (including
	// ShedRatioByClass); the others keep their defaults.
	Templates map[Signal]string
	// Window is the rate window. It should cover at least four scrape
	// intervals. Default 1m.
	Window time.Duration
	// MaxAge marks an entry whose newest SDK sample (see Freshness) is older
	// than this as stale: every signal reads Stale. An entry the Freshness
	// query does not answer for at all is stale too. Default 2m; negative
	// disables the age check.
	MaxAge time.Duration
	// Concurrency bounds the queries in flight per Read. Default 4.
	Concurrency int
	// PerSignal sends one query per signal even to a PromQLSource, instead
	// of deriving the default-template signals from shared queries (see the
	// package documentation). The values are the same up to floating-point
	// summation order; the shared queries select each series once.
	PerSignal bool
}

// DefaultReaderOptions returns the defaults.
func DefaultReaderOptions() ReaderOptions {
	return ReaderOptions{Window: time.Minute, MaxAge: 2 * time.Minute, Concurrency: 4}
}

// Reader reads signals from a Source. It is safe for concurrent use.
type Reader struct {
	src    Source
	opts   ReaderOptions
	window string
	tmpl   templateSet
	plan   plan
}

// NewReader validates the options and templates and returns a Reader.
func NewReader(src Source, opts ReaderOptions) (*Reader, error) {
	if src == nil {
		return nil, fmt.Errorf("%w: source is nil", ErrInvalidOption)
	}
	def := DefaultReaderOptions()
	switch {
	case opts.Window < 0:
		return nil, fmt.Errorf("%w: window must be positive, got %s", ErrInvalidOption, opts.Window)
	case opts.Window == 0:
		opts.Window = def.Window
	case opts.Window%time.Millisecond != 0:
		return nil, fmt.Errorf("%w: window must be whole milliseconds, got %s", ErrInvalidOption, opts.Window)
	}
	if opts.MaxAge == 0 {
		opts.MaxAge = def.MaxAge
	}
	if opts.Concurrency < 0 {
		return nil, fmt.Errorf("%w: concurrency must not be negative, got %d", ErrInvalidOption, opts.Concurrency)
	}
	if opts.Concurrency == 0 {
		opts.Concurrency = def.Concurrency
	}
	tmpl, err := compileTemplates(opts.Templates)
	if err != nil {
		return nil, err
	}
	_, promql := src.(PromQLSource)
	p, err := newPlan(tmpl, opts.Templates, opts.PerSignal || !promql)
	if err != nil {
		return nil, fmt.Errorf("%w: shared queries: %v", ErrInvalidOption, err)
	}
	return &Reader{src: src, opts: opts, window: model.Duration(opts.Window).String(), tmpl: tmpl, plan: p}, nil
}

// Query renders the template of signal s for a scope and services, as Read
// would send it. It is useful for showing the query behind a chart.
func (r *Reader) Query(s Signal, scope Scope, services ...string) (string, error) {
	t, ok := r.tmpl[s]
	if !ok {
		return "", fmt.Errorf("%w: unknown signal %q", ErrInvalidOption, s)
	}
	sel, err := selector(services)
	if err != nil {
		return "", err
	}
	return render(t, TemplateData{Selector: sel, By: scope.by(), Window: r.window})
}

// selector builds the service matcher, followed by a comma.
func selector(services []string) (string, error) {
	for i, s := range services {
		if s == "" {
			return "", fmt.Errorf("%w: services[%d]: empty service name", ErrInvalidOption, i)
		}
		if !utf8.ValidString(s) {
			return "", fmt.Errorf("%w: services[%d]: not valid UTF-8", ErrInvalidOption, i)
		}
	}
	switch len(services) {
	case 0:
		return "", nil
	case 1:
		return "service=" + strconv.Quote(services[0]) + ",", nil
	}
	q := make([]string, len(services))
	for i, s := range services {
		q[i] = regexp.QuoteMeta(s)
	}
	return "service=~" + strconv.Quote(strings.Join(q, "|")) + ",", nil
}

type answer struct {
	sig Signal
	res *Result
	err error
	// partial is the first partial-data warning of a query the answer
	// comes from (see PartialData); derive sets it for every signal of a
	// shared query, whose warnings only the first of them carries.
	partial string
}

// Read evaluates every signal at time at for the given scope, restricted to
// services (all services when none are given). From a PromQLSource the
// default-template signals come from shared queries; a shared query's failure
// fails every signal derived from it. Per-signal failures are kept
// in the snapshot (Errors, and a Failed status on that signal), and so are
// partial-data warnings (Partial, and a Partial status on that signal, see
// PartialData), and so is a template that fails to render (Errors, with
// ErrInvalidOption); Read returns an error only for bad arguments or when
// every query failed.
func (r *Reader) Read(ctx context.Context, at time.Time, scope Scope, services ...string) (*Snapshot, error) {
	sel, err := selector(services)
	if err != nil {
		return nil, err
	}
	data := TemplateData{Selector: sel, By: scope.by(), Window: r.window}
	answers := make([]answer, 0, len(r.tmpl))
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		sem = make(chan struct{}, r.opts.Concurrency)
	)
	run := func(ask func() (*Result, error), done func(*Result, error)) {
		wg.Go(func() {
			sem <- struct{}{}
			res, err := ask()
			<-sem
			done(res, err)
		})
	}
	derived, err := r.readShared(ctx, at, data, scope, services, run)
	if err != nil {
		wg.Wait()
		return nil, fmt.Errorf("%w: shared query: %v", ErrInvalidOption, err)
	}
	series, _ := r.src.(SeriesSource)
	for _, s := range r.plan.own {
		q, err := render(r.tmpl[s], data)
		if err != nil {
			// Only this signal's template is at fault: the others are read.
			mu.Lock()
			answers = append(answers, answer{sig: s, err: fmt.Errorf("%w: templates.%s: %v", ErrInvalidOption, s, err)})
			mu.Unlock()
			continue
		}
		ask := func() (*Result, error) { return r.src.Query(ctx, q, at) }
		if gq, ok := ownGauges[s]; ok && series != nil && !r.opts.PerSignal && !r.overridden(s) {
			ask = func() (*Result, error) {
				res, err := gq.eval(ctx, series, services, scope, at)
				if errors.Is(err, ErrNotFloat) {
					return r.src.Query(ctx, q, at)
				}
				return res, err
			}
		}
		run(ask, func(res *Result, err error) {
			mu.Lock()
			answers = append(answers, answer{sig: s, res: res, err: err})
			mu.Unlock()
		})
	}
	wg.Wait()
	answers = append(answers, derived()...)
	return r.assemble(at, scope, answers)
}

// overridden reports whether configuration overrides the template of s.
func (r *Reader) overridden(s Signal) bool {
	_, ok := r.opts.Templates[s]
	return ok
}

func (r *Reader) assemble(at time.Time, scope Scope, answers []answer) (*Snapshot, error) {
	snap := &Snapshot{At: at, Scope: scope, Entries: map[Key]*Entry{}, Errors: map[Signal]error{}}
	entry := func(k Key) *Entry {
		e, ok := snap.Entries[k]
		if !ok {
			e = newEntry(k)
			snap.Entries[k] = e
		}
		return e
	}
	var errs []error
	for _, a := range answers {
		if a.err != nil {
			snap.Errors[a.sig] = a.err
			errs = append(errs, fmt.Errorf("%s: %w", a.sig, a.err))
			continue
		}
		for _, w := range a.res.Warnings {
			snap.Warnings = append(snap.Warnings, string(a.sig)+": "+w)
		}
		if a.res.Type != TypeVector {
			snap.Errors[a.sig] = fmt.Errorf("%w: %s: want a vector result, got %s", ErrQuery, a.sig, a.res.Type)
			continue
		}
		if a.partial == "" {
			a.partial = firstPartial(a.res.Warnings)
		}
		if a.partial != "" {
			if snap.Partial == nil {
				snap.Partial = map[Signal]string{}
			}
			snap.Partial[a.sig] = a.partial
		}
		var (
			dups int
			dup  Labels // the first sample that repeated a key
		)
		for _, smp := range a.res.Samples {
			k, ok := keyOf(smp.Labels, scope)
			if !ok {
				snap.Warnings = append(snap.Warnings, fmt.Sprintf("%s: sample %s lacks the labels of its scope, ignored", a.sig, smp.Labels))
				continue
			}
			e := entry(k)
			switch a.sig {
			case Freshness:
				if v := classify(a.sig, smp.V); v.Known() {
					e.Newest = time.UnixMilli(int64(v.V * 1000))
				}
			case Reporting:
				if v := classify(a.sig, smp.V); v.Known() {
					e.Reporting = int(v.V)
				}
			case ShedRatioByClass:
				class := smp.Labels["class"]
				if _, seen := e.ShedByClass[class]; seen {
					if dups++; dup == nil {
						dup = smp.Labels
					}
					continue
				}
				e.ShedByClass[class] = classify(a.sig, smp.V)
			default:
				if e.Values[a.sig].Status != Missing {
					if dups++; dup == nil {
						dup = smp.Labels
					}
					continue
				}
				e.Values[a.sig] = classify(a.sig, smp.V)
			}
		}
		if dups > 0 {
			// No one of them is the key's value: the query does not
			// aggregate by the scope's labels (a missing sum by).
			snap.Errors[a.sig] = ambiguous(a.sig, scope, dups, dup)
			delete(snap.Partial, a.sig)
		}
	}
	if len(errs) == len(answers) && len(answers) > 0 {
		return nil, fmt.Errorf("signals: every query failed: %w", errors.Join(errs...))
	}
	for _, e := range snap.Entries {
		for s, err := range snap.Errors {
			if s == Freshness || s == Reporting {
				continue
			}
			if s == ShedRatioByClass {
				for c := range e.ShedByClass {
					e.ShedByClass[c] = Unknown(Failed, err.Error())
				}
				continue
			}
			e.Values[s] = Unknown(Failed, err.Error())
		}
		for s, w := range snap.Partial {
			v := Unknown(Partial, string(s)+": "+w)
			switch s {
			case Freshness, Reporting:
			case ShedRatioByClass:
				for c := range e.ShedByClass {
					e.ShedByClass[c] = v
				}
			default:
				e.Values[s] = v
			}
		}
		status, detail := Stale, r.staleness(at, e, snap.Errors[Freshness] == nil)
		if w, partial := snap.Partial[Freshness]; partial && detail != "" && e.Newest.IsZero() {
			// The freshness query may have lost this entry's series: whether
			// it is stale is unknown.
			status, detail = Partial, string(Freshness)+": "+w
		}
		if detail != "" {
			for s := range e.Values {
				e.Values[s] = Unknown(status, detail)
			}
			for c := range e.ShedByClass {
				e.ShedByClass[c] = Unknown(status, detail)
			}
		}
	}
	return snap, nil
}

// staleness explains why e is stale, or returns "". An entry is stale when
// its newest SDK sample is older than MaxAge, or when the freshness query
// answered but not for this entry: its SDK gauges are gone (the target is
// down or removed, so staleness markers ended them) while rate windows still
// hold its last samples. When the freshness query failed, no entry can be
// told from a dead target's, so every one is stale: a controller that
// pauses for a cycle does less harm than one acting on a dead target's last
// rates.
func (r *Reader) staleness(at time.Time, e *Entry, freshnessAnswered bool) string {
	if e.Newest.IsZero() {
		if freshnessAnswered {
			return "no current SDK sample (target down or gone)"
		}
		if r.opts.MaxAge > 0 {
			return "freshness unknown: the freshness query failed"
		}
		return ""
	}
	if age := at.Sub(e.Newest); r.opts.MaxAge > 0 && age > r.opts.MaxAge {
		return fmt.Sprintf("newest sample %s old (max %s)", age.Truncate(time.Second), r.opts.MaxAge)
	}
	return ""
}

// ambiguous is the error of a signal whose query answered n samples beyond
// one per key (per key and class for ShedRatioByClass), first the first of
// those.
func ambiguous(s Signal, scope Scope, n int, first Labels) error {
	by := scope.by()
	if s == ShedRatioByClass {
		by += ", class"
	}
	return fmt.Errorf("%w: %s: %d samples beyond one per key (first %s): the query must answer one sample per (%s), e.g. aggregate with sum by (%s)",
		ErrQuery, s, n, first, by, by)
}

func keyOf(l Labels, scope Scope) (Key, bool) {
	svc, ok := l["service"]
	if !ok || svc == "" {
		return Key{}, false
	}
	if scope == PerService {
		return Key{Service: svc}, true
	}
	inst, ok := l["instance"]
	if !ok || inst == "" {
		return Key{}, false
	}
	return Key{Service: svc, Instance: inst}, true
}
