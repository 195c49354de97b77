package recommend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/clock"
)

// ErrNothing is returned by Submit for a recommendation without a ruleset.
var ErrNothing = errors.New("recommend: nothing to propose")

// EngineActor is who the engine acts as in the rules store.
func EngineActor() versioning.Actor {
	return versioning.Actor{Name: "engine", Roles: []versioning.Role{versioning.RoleOperator}}
}

// Proposer writes recommendations to the rules store as proposed versions.
type Proposer struct {
	// Store is required.
	Store versioning.Store
	// Actor defaults to EngineActor.
	Actor versioning.Actor
	// Clock defaults to clock.Real.
	Clock clock.Clock
	// OpenDeadband is the relative move below which an open engine
	// proposal keeps its ruleset: when the new recommendation differs from
	// it only by rate ceilings and concurrency bounds, each within this
	// share of the open proposal's value, and waits for approval, only the
	// evidence of the open proposal is revised. Default DefaultOpenDeadband
	// (0.1); valid in (0, 1).
	OpenDeadband float64
	// EvidenceRefresh is the least time between two revisions of an open
	// proposal that leave its ruleset as it is (evidence only), so that a
	// recommendation repeated every evaluation does not write an audited
	// revision every evaluation. A revision that changes the ruleset is
	// never held back. Default DefaultEvidenceRefresh (1 minute); negative:
	// refresh on every submission.
	EvidenceRefresh time.Duration
	// RollbackHold is how long after a rollback of a version that applied
	// itself (by the guardrail or a person) a ceiling change in the same
	// direction does not apply itself but waits for a person, however
	// small: the engine must not redo, minutes later, what was just undone
	// (a cut, its rollback, the same cut again). A change the other way is
	// not held. Default DefaultRollbackHold (1 hour); negative: no hold.
	RollbackHold time.Duration
}

// DefaultEvidenceRefresh is the default Proposer.EvidenceRefresh.
const DefaultEvidenceRefresh = time.Minute

// DefaultRollbackHold is the default Proposer.RollbackHold.
const DefaultRollbackHold = time.Hour

// Validate checks the proposer's options; errors name the field.
func (p *Proposer) Validate() error {
	if p.Store == nil {
		return fmt.Errorf("%w: Proposer.Store is nil, want a rules store", ErrInvalidOption)
	}
	if d := p.OpenDeadband; d != 0 && !(d > 0 && d < 1) {
		return fmt.Errorf("%w: Proposer.OpenDeadband is %v, want in (0, 1)", ErrInvalidOption, d)
	}
	if r := p.EvidenceRefresh; r > 24*time.Hour {
		return fmt.Errorf("%w: Proposer.EvidenceRefresh is %v, want at most 24h (negative: every submission)", ErrInvalidOption, r)
	}
	return nil
}

// Submitted is what Submit did.
type Submitted struct {
	Version versioning.Version `json:"version"`
	// AutoApplied is true when the version went live inside its band.
	AutoApplied bool `json:"auto_applied"`
	// Policy says why it applied itself or waits for approval.
	Policy string `json:"policy"`
	// Replaced is the open engine proposal this one replaced (0: none):
	// withdrawn in the transaction that proposed the new version, because
	// the new one applies itself or the open one was based on another
	// version.
	Replaced int64 `json:"replaced,omitempty"`
	// Revised is true when the open engine proposal was revised in place
	// (Version is it, with its new Revision).
	Revised bool `json:"revised,omitempty"`
	// Unchanged is true when the ruleset waiting for approval stayed as it
	// was: the open proposal has the same content, or (see Kept) the new
	// recommendation moves it only inside the open deadband. Its evidence
	// was refreshed if Revised.
	Unchanged bool `json:"unchanged,omitempty"`
	// Kept says why an open proposal's ruleset was kept although the
	// recommendation differs from it, or why nothing was proposed (see
	// Rejected).
	Kept string `json:"kept,omitempty"`
	// Rejected is the engine proposal a person rejected that this
	// recommendation repeats (0: none): based on the same active version,
	// with the same ruleset or one inside OpenDeadband of it, and waiting
	// for approval. Nothing is proposed (Unchanged, Version is the rejected
	// one) until the recommendation moves beyond the deadband, the active
	// version changes or the band lets it apply itself.
	Rejected int64 `json:"rejected,omitempty"`
	// Band is the band the auto-apply decision used and BandSource where
	// it came from: BandFromPolicy or BandFromConfig (see PolicyBand).
	Band       Band   `json:"band"`
	BandSource string `json:"band_source"`
}

// Submit proposes rec's ruleset, applying it itself inside the service's
// band: the band a person set in the service's policy in the store when
// there is one, else band, the engine's configured band (see PolicyBand).
//
// At most one engine proposal per service stays open, updated in place
// rather than stacked. While a recommendation waits for approval and is
// based on the same version as the open engine proposal, that proposal is
// revised (versioning.Store.Revise: same number, Revision + 1): its
// evidence always, its ruleset when the recommendation moved beyond
// OpenDeadband (which invalidates approvals already given on it). Only
// evidence-only revisions are spaced by EvidenceRefresh. A recommendation
// that applies itself, or one based on another version than the open
// proposal, is proposed as a new version that replaces (withdraws) the open
// one in the same transaction. Proposals by people are never touched. A
// recommendation waiting for approval that repeats the engine's proposal a
// person rejected (same base version, ruleset inside OpenDeadband of it) is
// not proposed again (Submitted.Rejected).
//
// Breaker threshold changes are outside every band: with a ceiling move
// the band allows, the ceiling move alone is submitted (and applies
// itself) and the breaker change is recommended again on a later cycle;
// otherwise the whole proposal waits for approval.
func (p *Proposer) Submit(ctx context.Context, rec Recommendation, band Band) (Submitted, error) {
	if rec.Ruleset == nil || rec.Evidence == nil {
		return Submitted{}, ErrNothing
	}
	if err := p.Validate(); err != nil {
		return Submitted{}, err
	}
	deadband := p.OpenDeadband
	if deadband == 0 {
		deadband = DefaultOpenDeadband
	}
	refresh := p.EvidenceRefresh
	if refresh == 0 {
		refresh = DefaultEvidenceRefresh
	}
	actor := p.Actor
	if actor.Name == "" {
		actor = EngineActor()
	}
	clk := p.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	pol, err := p.Store.Policy(ctx, rec.Service)
	if err != nil {
		return Submitted{}, fmt.Errorf("recommend: policy of %s: %w", rec.Service, err)
	}
	band, bandSource := PolicyBand(pol, band)
	versions, err := p.Store.List(ctx, versioning.ListFilter{Service: rec.Service, Limit: 200})
	if err != nil {
		return Submitted{}, fmt.Errorf("recommend: list versions: %w", err)
	}
	now := clk.Now()
	recorded := &recordedCeilings{versions: versions}
	ref := hourReference(recorded, rec.Evidence.Ceiling.From, now)
	ok, why := band.Allows(ref, rec.Evidence.Ceiling.To)
	if ok {
		ok, why = flapping(recorded, rec.Evidence.Ceiling, now, band, why)
	}
	if hold := p.rollbackHold(); ok && hold > 0 {
		if undone, back, like := rolledBack(recorded, rec.Evidence.Ceiling, now, hold); like {
			ok, why = false, fmt.Sprintf("v%d applied a like change by itself and was rolled back (v%d) at %s: a like change waits for a person until %s",
				undone, back.Number, back.ActivatedAt.UTC().Format(time.RFC3339), back.ActivatedAt.Add(hold).UTC().Format(time.RFC3339))
		}
	}
	if len(rec.Evidence.Breakers) > 0 {
		// The band pre-approves ceiling moves only: a breaker threshold
		// change always waits for a person. A ceiling move the band allows
		// goes ahead alone; the breaker change comes on a later cycle.
		if ok && rec.ceilingOnly != nil {
			rec = *rec.ceilingOnly
			why += "; breaker changes follow in a later proposal"
		} else {
			ok, why = false, "breaker thresholds change: waits for approval (ceiling: "+why+")"
		}
	}
	sum, err := rec.Ruleset.Checksum()
	if err != nil {
		return Submitted{}, fmt.Errorf("recommend: checksum: %w", err)
	}
	out := Submitted{Band: band, BandSource: bandSource, Policy: why}
	// The engine's own open proposals, newest first; more than one only
	// if an older engine stacked them.
	var open []versioning.Version
	for _, v := range versions {
		if v.State == versioning.StateProposed && v.Source == versioning.SourceEngine && v.Author == actor.Name {
			open = append(open, v)
		}
	}
	for _, v := range open[min(1, len(open)):] {
		if _, err := p.Store.Withdraw(ctx, rec.Service, v.Number, actor, "replaced by a newer recommendation"); err != nil &&
			!errors.Is(err, versioning.ErrInvalidState) {
			return Submitted{}, fmt.Errorf("recommend: withdraw %s v%d: %w", rec.Service, v.Number, err)
		}
	}
	evidence := func(kept string) (json.RawMessage, error) {
		raw, err := json.Marshal(struct {
			*Evidence
			AutoApply   bool    `json:"auto_apply"`
			Policy      string  `json:"policy"`
			Reference   float64 `json:"hour_reference"`
			Band        Band    `json:"band"`
			BandSource  string  `json:"band_source"`
			RulesetKept string  `json:"ruleset_kept,omitempty"`
		}{rec.Evidence, ok, why, ref, band, bandSource, kept})
		if err != nil {
			return nil, fmt.Errorf("recommend: evidence: %w", err)
		}
		return raw, nil
	}
	if len(open) == 0 && !ok {
		if v, k, again := rejectedAgain(versions, actor, rec, sum, deadband); again {
			out.Version, out.Unchanged, out.Kept, out.Rejected = v, true, k, v.Number
			return out, nil
		}
	}
	if len(open) > 0 && !ok && open[0].Parent == rec.Base {
		cur := open[0]
		rs, reason, kept := rec.Ruleset, clip(rec.Reason, versioning.MaxReasonBytes), ""
		same := cur.Checksum == sum
		if !same {
			if k, small := smallMove(cur.Ruleset, rec.Ruleset, deadband); small {
				rs, kept = cur.Ruleset, k
				rec.Evidence = keptEvidence(rec.Evidence, cur.Evidence)
			}
		}
		out.Version, out.Unchanged, out.Kept = cur, same || kept != "", kept
		if out.Unchanged {
			// The reason goes with the ruleset, which stays.
			reason = cur.Reason
			last := cur.RevisedAt
			if last.IsZero() {
				last = cur.CreatedAt
			}
			if refresh > 0 && now.Sub(last) < refresh {
				return out, nil
			}
		}
		raw, err := evidence(kept)
		if err != nil {
			return Submitted{}, err
		}
		v, err := p.Store.Revise(ctx, rec.Service, cur.Number, versioning.Proposal{
			BaseVersion: rec.Base, Ruleset: rs, Author: actor, Reason: reason, Evidence: raw,
			Source: versioning.SourceEngine,
		})
		if err != nil {
			return Submitted{}, fmt.Errorf("recommend: revise %s v%d: %w", rec.Service, cur.Number, err)
		}
		out.Version, out.Revised = v, true
		return out, nil
	}
	raw, err := evidence("")
	if err != nil {
		return Submitted{}, err
	}
	prop := versioning.Proposal{
		Service: rec.Service, BaseVersion: rec.Base, Ruleset: rec.Ruleset, Author: actor,
		Reason: clip(rec.Reason, versioning.MaxReasonBytes), Evidence: raw,
		Source: versioning.SourceEngine, AutoApply: ok,
	}
	if len(open) > 0 {
		prop.Replaces = open[0].Number
	}
	v, err := p.Store.Propose(ctx, prop)
	if err != nil {
		return Submitted{}, fmt.Errorf("recommend: propose %s: %w", rec.Service, err)
	}
	out.Version, out.AutoApplied, out.Replaced = v, v.AutoApplied, prop.Replaces
	return out, nil
}

// rejectedAgain finds the engine's newest proposal (versions newest
// first) and reports whether a person rejected it and rec repeats it: based
// on the same version, with the same ruleset (checksum sum) or one inside
// the deadband of it; kept says so.
func rejectedAgain(versions []versioning.Version, actor versioning.Actor, rec Recommendation, sum string, deadband float64) (v versioning.Version, kept string, again bool) {
	for _, v := range versions {
		if v.Source != versioning.SourceEngine || v.Author != actor.Name {
			continue
		}
		if v.State != versioning.StateRejected || v.Parent != rec.Base {
			return versioning.Version{}, "", false
		}
		if _, small := smallMove(v.Ruleset, rec.Ruleset, deadband); v.Checksum != sum && !small {
			return versioning.Version{}, "", false
		}
		return v, fmt.Sprintf("not proposed again: %s rejected v%d, and the recommendation moves its ruleset by at most the deadband of %.1f%%",
			v.DecidedBy, v.Number, 100*deadband), true
	}
	return versioning.Version{}, "", false
}

// keptEvidence is ev with the ceiling and concurrency bounds of the open
// proposal whose ruleset stays (its evidence open): the evidence stored
// with a ruleset describes that ruleset, since once it is published
// currentCeiling reads the ceiling in force back from it.
func keptEvidence(ev *Evidence, open json.RawMessage) *Evidence {
	var e struct {
		Ceiling     Ceiling           `json:"ceiling"`
		Concurrency map[string][2]int `json:"concurrency"`
	}
	if ev == nil || len(open) == 0 || json.Unmarshal(open, &e) != nil {
		return ev
	}
	out := *ev
	out.Ceiling, out.Concurrency = e.Ceiling, e.Concurrency
	return &out
}

func (p *Proposer) rollbackHold() time.Duration {
	if p.RollbackHold == 0 {
		return DefaultRollbackHold
	}
	return p.RollbackHold
}

// recordedCeilings are the versions a submission checks (newest first)
// with the ceilings their evidence recorded, each decoded at most once
// whichever checks read it (hourReference, flapping, rolledBack).
type recordedCeilings struct {
	versions []versioning.Version
	decoded  map[int]recordedCeiling // by index in versions
}

type recordedCeiling struct {
	c  Ceiling
	ok bool
}

// of returns the ceiling the evidence of versions[i] recorded (see
// decodeCeiling).
func (r *recordedCeilings) of(i int) (Ceiling, bool) {
	if d, done := r.decoded[i]; done {
		return d.c, d.ok
	}
	c, ok := decodeCeiling(r.versions[i].Evidence)
	if r.decoded == nil {
		r.decoded = map[int]recordedCeiling{}
	}
	r.decoded[i] = recordedCeiling{c, ok}
	return c, ok
}

// inWindow reports whether versions[i] applied itself within BandWindow
// of now.
func (r *recordedCeilings) inWindow(i int, now time.Time) bool {
	v := &r.versions[i]
	return v.AutoApplied && !v.ActivatedAt.IsZero() && now.Sub(v.ActivatedAt) <= BandWindow
}

// rolledBack finds, among the versions, a rollback activated within hold
// of now that undid a version which applied itself moving the ceiling in
// the same direction as c; it returns the undone version's number and the
// rollback.
func rolledBack(r *recordedCeilings, c Ceiling, now time.Time, hold time.Duration) (int64, versioning.Version, bool) {
	dir := direction(c)
	if dir == 0 {
		return 0, versioning.Version{}, false
	}
	for _, back := range r.versions {
		if back.RollbackOf == 0 || back.ActivatedAt.IsZero() || now.Sub(back.ActivatedAt) > hold {
			continue
		}
		i := slices.IndexFunc(r.versions, func(v versioning.Version) bool { return v.Number == back.Parent })
		if i < 0 || !r.versions[i].AutoApplied {
			continue
		}
		if undone, ok := r.of(i); ok && direction(undone) == dir {
			return back.Parent, back, true
		}
	}
	return 0, versioning.Version{}, false
}

// direction is the sign of a ceiling move: -1 a cut, +1 a raise, 0 none.
func direction(c Ceiling) int {
	switch {
	case c.To < c.From:
		return -1
	case c.To > c.From:
		return 1
	}
	return 0
}

// flapping refuses a ceiling move c that reverses an automatic change of
// the last BandWindow when the moves of that hour and c add up to more
// than the band: back and forth, each move inside the band and the net
// change nil, the ceiling would otherwise swing every few minutes. Moves
// in one direction are held by the net change alone (Band.Allows). It
// returns ok and why as they were otherwise.
func flapping(r *recordedCeilings, c Ceiling, now time.Time, band Band, why string) (bool, string) {
	dir := direction(c)
	if dir == 0 || !(c.From > 0) {
		return true, why
	}
	moved, reversed := 0.0, false
	for i := range r.versions {
		if !r.inWindow(i, now) {
			continue
		}
		e, ok := r.of(i)
		if !ok || !(e.From > 0) {
			continue
		}
		moved += math.Abs(e.To/e.From - 1)
		reversed = reversed || direction(e) == -dir
	}
	step := math.Abs(c.To/c.From - 1)
	if !reversed || moved+step <= band.MaxChangePerHour+1e-9 {
		return true, why
	}
	return false, fmt.Sprintf("the automatic changes within the hour moved the ceiling by %.1f%% back and forth; another %.1f%% the other way exceeds the band of %.1f%%",
		100*moved, 100*step, 100*band.MaxChangePerHour)
}

// hourReference is the ceiling in force before the automatic changes of the
// last BandWindow: the From of the oldest version that applied itself
// within it, or cur when none did.
func hourReference(r *recordedCeilings, cur float64, now time.Time) float64 {
	ref := cur
	for i := range r.versions {
		if !r.inWindow(i, now) {
			continue
		}
		if e, ok := r.of(i); ok && e.From > 0 {
			ref = e.From
		}
	}
	return ref
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
