package model

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"math"
	"slices"
	"strings"

	"governor.dev/governor/rules/versioning"
)

// Row is one service in the overview.
type Row struct {
	ServiceStatus
	// Known is false for services only the rules store knows (no live data).
	Known bool `json:"known"`
	// ActiveVersion is the approved version; Pending the open proposals.
	ActiveVersion int64 `json:"active_version"`
	Pending       int   `json:"open_proposals"`
	// Alerts counts firing, unacknowledged and unsilenced alerts by tier.
	Alerts map[Tier]int `json:"alerts"`
	// Attention is the sort key: higher needs a person sooner.
	Attention int `json:"attention"`
	// gaps is what Build learnt of why values are missing (nil for a row
	// Build did not make); see Missing.
	gaps *gaps
}

// SignalShedByClass names the overview's shed ratios by class for Missing
// (the engine's signal name); the other columns are SignalLoadScore,
// SignalRequestRate, SignalErrorRatio and SignalLatencyP99.
const SignalShedByClass = "shed_ratio_by_class"

// Gap says why a row has no value of a signal: Text for the cell ("no
// data", "no traffic", "not evaluated", "unknown"), Why for its tooltip.
type Gap struct{ Text, Why string }

// gaps is what Build read about missing values, shared by its rows.
type gaps struct {
	// fleet is the banner of a fleet that failed or is not configured,
	// "" when it answered in full.
	fleet string
	// signals are the gaps of the signals whose query failed or answered
	// in part, by signal name.
	signals map[string]Gap
}

// Missing says why r has no value of signal (SignalLoadScore,
// SignalRequestRate, SignalErrorRatio, SignalLatencyP99,
// SignalShedByClass), from what Build read: a service the engine does not
// evaluate (only the rules store or an alert names it), a fleet that could
// not be read, a signal whose query failed or answered in part, a service
// with no traffic (a request rate of zero: no error ratio, latency or shed
// ratio to measure), or a metrics source with no samples of it. It says
// nothing of whether r has a value: the caller asks only when it has none.
func (r Row) Missing(signal string) Gap {
	g := r.gaps
	if g == nil {
		g = &gaps{}
	}
	if !r.Known {
		if g.fleet != "" {
			return Gap{"unknown", "the engine's live data was not read (" + g.fleet + ")"}
		}
		return Gap{"not evaluated", "the engine does not evaluate this service: only its rules or alerts name it"}
	}
	if gap, ok := g.signals[signal]; ok {
		return gap
	}
	if signal == SignalLoadScore {
		return Gap{"no data", "the engine knows none of this service's load score inputs yet"}
	}
	if signal != SignalRequestRate && r.RequestRate != nil && *r.RequestRate == 0 {
		return Gap{"no traffic", "no requests in the window: nothing to measure"}
	}
	if g.fleet != "" {
		return Gap{"unknown", "the metrics source has no samples of it for this service, or it was not read (" + g.fleet + ")"}
	}
	return Gap{"no data", "the metrics source has no samples of it for this service"}
}

// signalGap is the gap of a signal whose query failed or answered in part.
func signalGap(p SignalProblem) Gap {
	if p.Failed {
		return Gap{"unknown", "the metrics query failed: " + p.Reason}
	}
	return Gap{"unknown", "the metrics source answered only in part: " + p.Reason}
}

// Overview is the whole fleet at a glance.
type Overview struct {
	Rows []Row `json:"services"`
	// FiringByTier counts firing alerts over all services, and those of no
	// service (fleet-wide alerts such as GovernorEngineTicksStalled), which have no
	// row.
	FiringByTier map[Tier]int `json:"firing_by_tier"`
	// OpenProposals over all services.
	OpenProposals int `json:"open_proposals"`
	// Problems names the sources that failed, and the signals the metrics
	// source answered only in part or not at all (shown as banners).
	Problems []string `json:"problems,omitempty"`
}

// Sources are what Build reads; any may be nil (not configured).
type Sources struct {
	Rules  versioning.Reader
	Fleet  Fleet
	Alerts Alerts
}

// Build assembles the overview. A failed source is reported in Problems and
// the rest is still shown; ctx's error is returned as is. A fleet's
// *SignalError names each partial or failed signal as a problem of its own
// ("metrics partial: ...", "metrics query failed: ..."), apart from the
// fleet's own failure ("metrics unavailable: ...").
func Build(ctx context.Context, s Sources) (Overview, error) {
	ov := Overview{FiringByTier: map[Tier]int{}}
	g := &gaps{}
	rows := map[string]*Row{}
	row := func(name string) *Row {
		r, ok := rows[name]
		if !ok {
			r = &Row{ServiceStatus: ServiceStatus{Name: name}, Alerts: map[Tier]int{}, gaps: g}
			rows[name] = r
		}
		return r
	}
	problem := func(what string, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		ov.Problems = append(ov.Problems, what+" unavailable: "+Brief(err))
		return nil
	}
	if s.Fleet != nil {
		sts, err := s.Fleet.Services(ctx)
		var sigErr *SignalError
		if errors.As(err, &sigErr) {
			if ctx.Err() != nil {
				return ov, ctx.Err()
			}
			err = sigErr.Err
		}
		if err != nil {
			if e := problem("metrics", err); e != nil {
				return ov, e
			}
			g.fleet = ov.Problems[len(ov.Problems)-1]
		}
		if sigErr != nil {
			g.signals = make(map[string]Gap, len(sigErr.Signals))
			for _, p := range sigErr.Signals {
				ov.Problems = append(ov.Problems, p.String())
				if _, ok := g.signals[p.Signal]; !ok {
					g.signals[p.Signal] = signalGap(p)
				}
			}
		}
		for _, st := range sts {
			r := row(st.Name)
			r.ServiceStatus, r.Known = finite(st), true
		}
	} else {
		ov.Problems = append(ov.Problems, "metrics source not configured")
		g.fleet = "metrics source not configured"
	}
	if s.Rules != nil {
		infos, err := s.Rules.Services(ctx)
		if err != nil {
			if e := problem("rules database", err); e != nil {
				return ov, e
			}
		}
		for _, in := range infos {
			r := row(in.Name)
			r.ActiveVersion, r.Pending = in.Active, in.Pending
			ov.OpenProposals += in.Pending
		}
	}
	if s.Alerts != nil {
		firing, err := s.Alerts.Firing(ctx)
		if err != nil {
			if e := problem("alerts", err); e != nil {
				return ov, e
			}
		}
		for _, a := range firing {
			ov.FiringByTier[a.Tier]++
			if a.Service != "" && a.AckedBy == "" && a.SilencedUntil.IsZero() {
				row(a.Service).Alerts[a.Tier]++
			}
		}
	}
	ov.Rows = make([]Row, 0, len(rows))
	for _, r := range rows {
		r.Attention = Attention(*r)
		ov.Rows = append(ov.Rows, *r)
	}
	slices.SortFunc(ov.Rows, func(a, b Row) int {
		if c := cmp.Compare(b.Attention, a.Attention); c != 0 {
			return c
		}
		if c := cmp.Compare(score(b), score(a)); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return ov, nil
}

// score is the row's load score in [0, 1], -1 if unknown.
func score(r Row) float64 {
	if r.LoadScore == nil || !isFinite(*r.LoadScore) {
		return -1
	}
	return min(max(*r.LoadScore, 0), 1)
}

func isFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// finite returns st with every value that is not a finite number made
// unknown: a NaN or an infinity is no data (the page says "no data", and
// the API can encode the overview: JSON has no NaN). The counts of an
// unknown rollout are zeroed: they mean nothing.
func finite(st ServiceStatus) ServiceStatus {
	for _, p := range []**float64{&st.LoadScore, &st.RequestRate, &st.ErrorRatio, &st.P99} {
		if *p != nil && !isFinite(**p) {
			*p = nil
		}
	}
	if st.Rollout.Unknown {
		st.Rollout = Rollout{Unknown: true}
	}
	st.Trend = slices.DeleteFunc(slices.Clone(st.Trend), func(p Point) bool { return !isFinite(p.Value) })
	st.Terms = slices.DeleteFunc(slices.Clone(st.Terms), func(t Term) bool {
		return !isFinite(t.Value) || !isFinite(t.Weight) || !isFinite(t.Contribution)
	})
	if st.ShedByClass != nil {
		st.ShedByClass = maps.Clone(st.ShedByClass)
		maps.DeleteFunc(st.ShedByClass, func(_ string, v float64) bool { return !isFinite(v) })
	}
	return st
}

// Attention ranks a service: unacknowledged P0 alerts first, then P1,
// refused rule versions (NACKED), overload, P2 alerts, stale instances,
// open proposals, a high load score (taken as at most 1; a load score that
// is not a finite number is unknown). An unknown rollout (Rollout.Unknown)
// adds nothing, whatever its counts: its instances are neither known to be
// in trouble nor known to be fine, and the overview's banner says why.
func Attention(r Row) int {
	ro := r.Rollout
	if ro.Unknown {
		ro = Rollout{}
	}
	a := 0
	a += 1_000_000 * min(r.Alerts[P0], 9)
	a += 100_000 * min(r.Alerts[P1], 9)
	if ro.Nacked > 0 {
		a += 50_000
	}
	if r.Overloaded {
		a += 20_000
	}
	a += 5_000 * min(r.Alerts[P2], 3)
	if ro.Stale > 0 || ro.Gone > 0 {
		a += 2_000
	}
	if r.Pending > 0 {
		a += 1_000
	}
	if s := score(r); s > 0 {
		a += int(s * 100)
	}
	return a
}

// Brief says err in one line for a banner: a database that does not
// answer or a timeout in words, anything else cut at its first line and
// 160 bytes.
func Brief(err error) string {
	switch {
	case errors.Is(err, versioning.ErrUnavailable):
		return "the database does not answer"
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	}
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}
