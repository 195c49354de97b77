package signalsource

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui/model"
)

// Enriched is a model.Fleet that fills in the golden signals a base fleet
// leaves unknown (request rate, error ratio, p99, shed ratio by class) from
// one snapshot of the metrics source per call: the overview shows what the
// engine reads even though its scores carry only the load score terms.
type Enriched struct {
	base    model.Fleet
	reader  *signals.Reader
	clk     clock.Clock
	timeout time.Duration
}

var _ model.Fleet = (*Enriched)(nil)

// Enrich wraps base. reader renders and runs the engine's queries.
func Enrich(base model.Fleet, reader *signals.Reader, clk clock.Clock) (*Enriched, error) {
	if base == nil || reader == nil {
		return nil, fmt.Errorf("%w: Enrich needs a fleet and a reader", ErrInvalid)
	}
	if clk == nil {
		clk = clock.Real{}
	}
	return &Enriched{base: base, reader: reader, clk: clk, timeout: DefaultTimeout}, nil
}

// WithTimeout sets the bound of the metrics read of Services (default
// DefaultTimeout; d <= 0 keeps it): a hung metrics source costs the
// overview at most d, and leaves the signals unknown with an error. It
// returns e, and is meant to be called before e is used.
func (e *Enriched) WithTimeout(d time.Duration) *Enriched {
	if d > 0 {
		e.timeout = d
	}
	return e
}

// Instances passes through to the base fleet when it knows the ledger.
func (e *Enriched) Instances(ctx context.Context, service string) ([]model.Instance, error) {
	if in, ok := e.base.(model.Instances); ok {
		return in.Instances(ctx, service)
	}
	return nil, nil
}

// ServiceDetail passes through to the base fleet when it reads the engine.
func (e *Enriched) ServiceDetail(ctx context.Context, service string) (model.ServiceDetail, error) {
	if d, ok := e.base.(model.Details); ok {
		return d.ServiceDetail(ctx, service)
	}
	return model.ServiceDetail{}, nil
}

// Services returns the base fleet's services with the missing signals
// filled in. A metrics failure leaves them unknown and is returned with the
// services, so the overview shows a banner and the rest. The services a
// failing base fleet still returns (the scores when only the delivery
// ledger failed) are filled in too, and its error is returned, first (on
// one line with a metrics failure, for the banner). When the read answered
// but some of the signals it fills in failed or came back partial (a store
// of a federated query that did not answer), the error is a
// *model.SignalError naming each with its reason (and holding the base
// fleet's error, if any), while the values that did come back are filled
// in: the overview tells "no data" from "the metrics store did not fully
// answer".
func (e *Enriched) Services(ctx context.Context) ([]model.ServiceStatus, error) {
	svcs, baseErr := e.base.Services(ctx)
	if len(svcs) == 0 {
		return svcs, baseErr
	}
	rctx, cancel := context.WithTimeout(ctx, e.timeout)
	snap, err := e.reader.Read(rctx, e.clk.Now(), signals.PerService)
	cancel()
	if err != nil {
		if baseErr != nil {
			return svcs, fmt.Errorf("%w; signalsource: metrics: %w", baseErr, err)
		}
		return svcs, fmt.Errorf("signalsource: metrics: %w", err)
	}
	known := func(v signals.Value) *float64 {
		if f, ok := v.Get(); ok {
			return &f
		}
		return nil
	}
	used := map[signals.Signal]bool{}
	for i := range svcs {
		s := &svcs[i]
		used[signals.RequestRate] = used[signals.RequestRate] || s.RequestRate == nil
		used[signals.ErrorRatio] = used[signals.ErrorRatio] || s.ErrorRatio == nil
		used[signals.LatencyP99] = used[signals.LatencyP99] || s.P99 == nil
		used[signals.ShedRatioByClass] = used[signals.ShedRatioByClass] || s.ShedByClass == nil
		entry, ok := snap.Entries[signals.Key{Service: s.Name}]
		if !ok {
			continue
		}
		if s.RequestRate == nil {
			s.RequestRate = known(entry.Get(signals.RequestRate))
		}
		if s.ErrorRatio == nil {
			s.ErrorRatio = known(entry.Get(signals.ErrorRatio))
		}
		if s.P99 == nil {
			s.P99 = known(entry.Get(signals.LatencyP99))
		}
		if s.ShedByClass == nil && len(entry.ShedByClass) > 0 {
			s.ShedByClass = map[string]float64{}
			for class, v := range entry.ShedByClass {
				if f, ok := v.Get(); ok {
					s.ShedByClass[class] = f
				}
			}
		}
	}
	if probs := signalProblems(snap, used); len(probs) > 0 {
		return svcs, &model.SignalError{Err: baseErr, Signals: probs}
	}
	return svcs, baseErr
}

// overviewSignals are the signals Services reads, in the overview's
// order; Freshness decides whether they are stale.
var overviewSignals = [...]signals.Signal{signals.RequestRate, signals.ErrorRatio, signals.LatencyP99, signals.ShedRatioByClass, signals.Freshness}

// signalProblems names the signals of snap that Services used (Freshness
// whenever any was) whose query failed or answered partial data.
func signalProblems(snap *signals.Snapshot, used map[signals.Signal]bool) []model.SignalProblem {
	anyUsed := false
	for _, u := range used {
		anyUsed = anyUsed || u
	}
	var out []model.SignalProblem
	for _, sig := range overviewSignals {
		if !anyUsed || sig != signals.Freshness && !used[sig] {
			continue
		}
		if err, ok := snap.Errors[sig]; ok {
			out = append(out, model.SignalProblem{Signal: string(sig), Failed: true, Reason: queryFailure(err)})
		} else if w, ok := snap.Partial[sig]; ok {
			out = append(out, model.SignalProblem{Signal: string(sig), Reason: cut(w)})
		}
	}
	return out
}

// cut shortens a warning to maxWarningSize bytes, on a rune boundary.
func cut(w string) string {
	w = strings.TrimSpace(w)
	if len(w) <= maxWarningSize {
		return w
	}
	n := maxWarningSize
	for n > 0 && !utf8.RuneStart(w[n]) {
		n--
	}
	return w[:n] + "…"
}
