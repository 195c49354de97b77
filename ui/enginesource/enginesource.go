// Package enginesource adapts the decision engine's read side (the
// evaluator's load scores and the delivery ledger) to the web UI's
// model.Fleet: each service's smoothed load score with its terms and a trend
// kept here (one point per engine evaluation), its p99 latency (the latency
// term's input), and its rollout state counted from the ledger. It also
// implements model.Instances for the per-instance ledger of a service page,
// and model.Details: the alert levels and the versions the relay could
// not deliver.
//
// Request rate, error ratio and shed ratios are not in the engine's scores
// yet; they are left unknown (shown as "no data"), never zero. So is the
// rollout state when the ledger is not configured or fails. With
// Options.MaxAge, scores whose evaluation is too old are an error
// (ErrStale), not shown as live.
package enginesource

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"governor.dev/governor/engine/api"
	"governor.dev/governor/engine/evaluate"
	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/rules/distribution"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui/model"
)

// ErrInvalid: bad options.
var ErrInvalid = errors.New("enginesource: invalid options")

// ErrStale reports an evaluator whose last evaluation is older than
// Options.MaxAge: its load scores are old (it cannot read its metrics,
// say), and Services does not present them as current.
var ErrStale = errors.New("enginesource: the engine's last evaluation is too old")

// Scores is the evaluator's read side (*evaluate.Evaluator).
type Scores interface {
	Scores() []loadscore.Score
	LastTick() time.Time
}

// Ledger is the delivery ledger's read side (*distribution.Ledger).
type Ledger interface {
	Instances(ctx context.Context, service string) ([]distribution.Instance, error)
}

// Relay lists the rule versions the relay gave up delivering, as the rules
// store records them (*distribution.Plane).
type Relay interface {
	Undeliverable(ctx context.Context, service string) ([]distribution.Undeliverable, error)
}

// Options configure New.
type Options struct {
	// Scores is required; Ledger may be nil (the rollout state is then
	// unknown).
	Scores Scores
	Ledger Ledger
	// Levels, if set, gives a service's p99 alert levels (the engine's
	// evaluate.AlertLevels.P99Levels); ok false when it has none.
	Levels func(service string) (model.LatencyLevels, bool)
	// AlertLevels, if set, gives the alert levels in force for a service
	// per signal (*evaluate.Evaluator.AlertLevelsInForce).
	AlertLevels func(service string) []evaluate.SignalLevels
	// Relay, if set, lists the versions that cannot be delivered.
	Relay Relay
	// TrendLen is how many evaluations the trend keeps; default 60.
	TrendLen int
	// MaxAge is how old the last evaluation may be before Services fails
	// with ErrStale instead of showing the last scores and overload flags
	// as live (the pages show a banner), as package engineclient does for a
	// separate UI process. Zero or negative: never (the default, since the
	// age is only right on the clock the evaluator ticks on).
	MaxAge time.Duration
	// Clock tells the age of the last evaluation; default clock.Real. It
	// must be the clock the evaluator's ticks are timed on.
	Clock clock.Clock
}

// Source is a model.Fleet over the engine.
type Source struct {
	o     Options
	mu    sync.Mutex
	last  time.Time
	trend map[string][]model.Point
}

var (
	_ model.Fleet     = (*Source)(nil)
	_ model.Instances = (*Source)(nil)
	_ model.Details   = (*Source)(nil)
)

// New returns a Source.
func New(o Options) (*Source, error) {
	if o.Scores == nil {
		return nil, fmt.Errorf("%w: Options.Scores is required", ErrInvalid)
	}
	if o.TrendLen <= 0 {
		o.TrendLen = 60
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	return &Source{o: o, trend: map[string][]model.Point{}}, nil
}

// Services returns every service the engine scores, by name. When the
// ledger fails it returns the services with the error, naming the ledger:
// the scores are still good, but the rollout counts of the service that
// failed and of those after it were not read, so their Rollout is unknown
// (model.Rollout.Unknown). Without a ledger every Rollout is unknown.
func (s *Source) Services(ctx context.Context) ([]model.ServiceStatus, error) {
	scores := s.o.Scores.Scores()
	tick := s.o.Scores.LastTick()
	if age := s.o.Clock.Now().Sub(tick); s.o.MaxAge > 0 && !tick.IsZero() && age > s.o.MaxAge {
		return nil, fmt.Errorf("%w: at %s, %s ago", ErrStale, tick.UTC().Format(time.RFC3339), age.Round(time.Second))
	}
	s.mu.Lock()
	fresh := tick.After(s.last)
	if fresh {
		s.last = tick
	}
	var out []model.ServiceStatus
	for _, sc := range scores {
		if sc.Key.Instance != "" {
			continue
		}
		st := model.ServiceStatus{Name: sc.Key.Service, Overloaded: sc.Overloaded}
		if sc.Known {
			v := sc.Value
			st.LoadScore = &v
			if fresh {
				pts := append(s.trend[st.Name], model.Point{At: sc.At, Value: v})
				if len(pts) > s.o.TrendLen {
					pts = pts[len(pts)-s.o.TrendLen:]
				}
				s.trend[st.Name] = pts
			}
		}
		st.Trend = slices.Clone(s.trend[st.Name])
		for _, c := range sc.Raw.Terms {
			if !c.Known {
				continue
			}
			st.Terms = append(st.Terms, model.Term{Name: string(c.Term), Value: c.Normalized, Weight: c.EffectiveWeight, Contribution: c.Contribution})
			if c.Term == loadscore.Latency {
				if v, ok := c.Input.Get(); ok {
					st.P99 = &v
				}
			}
		}
		out = append(out, st)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b model.ServiceStatus) int { return strings.Compare(a.Name, b.Name) })
	for i := range out {
		out[i].Rollout = model.Rollout{Unknown: true}
	}
	if s.o.Ledger != nil && len(out) > 0 {
		// One read for every service: the overview renders, and streams
		// every two seconds to each viewer, a fleet of hundreds of
		// services; a read per service was hundreds of queries each time.
		all, err := s.o.Ledger.Instances(ctx, "")
		if err != nil {
			return out, fmt.Errorf("enginesource: delivery ledger: %w", err)
		}
		by := make(map[string][]distribution.Instance, len(out))
		for _, in := range all {
			by[in.Service] = append(by[in.Service], in)
		}
		for i := range out {
			out[i].Rollout = rollout(by[out[i].Name])
		}
	}
	return out, nil
}

func rollout(ins []distribution.Instance) model.Rollout {
	var r model.Rollout
	for _, in := range ins {
		switch in.State {
		case distribution.StateSynced:
			r.Synced++
		case distribution.StatePending:
			r.Pending++
		case distribution.StateStale:
			r.Stale++
		case distribution.StateNacked:
			r.Nacked++
		case distribution.StateGone:
			r.Gone++
		case distribution.StateUnpublished:
			r.Unpublished++
		}
	}
	return r
}

// Instances returns a service's instances from the ledger.
func (s *Source) Instances(ctx context.Context, service string) ([]model.Instance, error) {
	if s.o.Ledger == nil {
		return nil, nil
	}
	ins, err := s.o.Ledger.Instances(ctx, service)
	if err != nil {
		return nil, err
	}
	out := make([]model.Instance, len(ins))
	for i, in := range ins {
		out[i] = model.Instance{Name: in.Instance, State: string(in.State), Running: in.Running, Target: in.Target,
			Since: in.Since, LastSeen: in.LastSeen, NackError: in.NackError}
	}
	return out, nil
}

// ServiceDetail returns a service's alert levels and its versions the
// relay gave up on.
func (s *Source) ServiceDetail(ctx context.Context, service string) (model.ServiceDetail, error) {
	var d model.ServiceDetail
	if s.o.Levels != nil {
		if lv, ok := s.o.Levels(service); ok {
			d.P99 = &lv
		}
	}
	if s.o.AlertLevels != nil {
		d.Levels = AlertLevels(s.o.AlertLevels(service))
	}
	if s.o.Relay != nil {
		us, err := s.o.Relay.Undeliverable(ctx, service)
		if err != nil {
			return d, err
		}
		for _, u := range us {
			d.Undeliverable = append(d.Undeliverable, Undeliverable(u))
		}
	}
	return d, nil
}

// Undeliverable converts the relay's record to the UI's.
func Undeliverable(u distribution.Undeliverable) model.Undeliverable {
	return model.Undeliverable{Service: u.Service, Version: u.Version, Reason: u.Reason, Size: u.Size, Limit: u.Limit, Error: u.Error, At: u.At}
}

// AlertLevels converts the evaluator's levels to the UI's, as the engine
// API does (api.AlertLevelsOf): unknown numbers (levels not in force, a
// baseline still learning) are nil.
func AlertLevels(in []evaluate.SignalLevels) []model.AlertLevel {
	levels := api.AlertLevelsOf(in)
	if levels == nil {
		return nil
	}
	out := make([]model.AlertLevel, len(levels))
	for i, l := range levels {
		out[i] = model.AlertLevel(l)
	}
	return out
}
