package recommend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	// proposal is kept rather than replaced: when the new recommendation
	// differs from it only by rate ceilings and concurrency bounds, each
	// within this share of the open proposal's value, and waits for
	// approval, no new version is proposed. Default DefaultOpenDeadband
	// (0.1); valid in (0, 1).
	OpenDeadband float64
}

// Validate checks the proposer's options; errors name the field.
func (p *Proposer) Validate() error {
	if p.Store == nil {
		return fmt.Errorf("%w: Proposer.Store is nil, want a rules store", ErrInvalidOption)
	}
	if d := p.OpenDeadband; d != 0 && !(d > 0 && d < 1) {
		return fmt.Errorf("%w: Proposer.OpenDeadband is %v, want in (0, 1)", ErrInvalidOption, d)
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
	// Replaced is the open engine proposal this one replaced (0: none).
	Replaced int64 `json:"replaced,omitempty"`
	// Unchanged is true when the open proposal was kept instead of
	// proposing again: it has the same content, or (see Kept) the new
	// recommendation moves it only inside the open deadband.
	Unchanged bool `json:"unchanged,omitempty"`
	// Kept says why an open proposal with other content was kept.
	Kept string `json:"kept,omitempty"`
	// Band is the band the auto-apply decision used and BandSource where
	// it came from: BandFromPolicy or BandFromConfig (see PolicyBand).
	Band       Band   `json:"band"`
	BandSource string `json:"band_source"`
}

// Submit proposes rec's ruleset, applying it itself inside the service's
// band: the band a person set in the service's policy in the store when
// there is one, else band, the engine's configured band (see PolicyBand). At most one
// engine proposal per service stays open: an older open one with other
// content is withdrawn and replaced, one with the same content is kept, and
// so is one the new recommendation, waiting for approval, differs from only
// by rate ceilings and concurrency bounds inside OpenDeadband.
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
	ref := hourReference(versions, rec.Evidence.Ceiling.From, clk.Now())
	ok, why := band.Allows(ref, rec.Evidence.Ceiling.To)
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
	out := Submitted{Band: band, BandSource: bandSource}
	for _, v := range versions {
		if v.State != versioning.StateProposed || v.Source != versioning.SourceEngine {
			continue
		}
		if v.Checksum == sum && v.Parent == rec.Base && !ok {
			out.Version, out.Policy, out.Unchanged = v, why, true
			return out, nil
		}
		if v.Parent == rec.Base && !ok {
			if kept, small := smallMove(v.Ruleset, rec.Ruleset, deadband); small {
				out.Version, out.Policy, out.Unchanged, out.Kept = v, why, true, kept
				return out, nil
			}
		}
		if _, err := p.Store.Withdraw(ctx, rec.Service, v.Number, actor, "replaced by a newer recommendation"); err != nil &&
			!errors.Is(err, versioning.ErrInvalidState) {
			return Submitted{}, fmt.Errorf("recommend: withdraw %s v%d: %w", rec.Service, v.Number, err)
		}
		out.Replaced = v.Number
	}
	ev := struct {
		*Evidence
		AutoApply  bool    `json:"auto_apply"`
		Policy     string  `json:"policy"`
		Reference  float64 `json:"hour_reference"`
		Band       Band    `json:"band"`
		BandSource string  `json:"band_source"`
	}{rec.Evidence, ok, why, ref, band, bandSource}
	raw, err := json.Marshal(ev)
	if err != nil {
		return Submitted{}, fmt.Errorf("recommend: evidence: %w", err)
	}
	v, err := p.Store.Propose(ctx, versioning.Proposal{
		Service: rec.Service, BaseVersion: rec.Base, Ruleset: rec.Ruleset, Author: actor,
		Reason: clip(rec.Reason, versioning.MaxReasonBytes), Evidence: raw,
		Source: versioning.SourceEngine, AutoApply: ok,
	})
	if err != nil {
		return Submitted{}, fmt.Errorf("recommend: propose %s: %w", rec.Service, err)
	}
	out.Version, out.AutoApplied, out.Policy = v, v.AutoApplied, why
	return out, nil
}

// hourReference is the ceiling in force before the automatic changes of the
// last hour: the From of the oldest version that applied itself within the
// hour, or cur when none did.
func hourReference(newestFirst []versioning.Version, cur float64, now time.Time) float64 {
	ref := cur
	for _, v := range newestFirst {
		if !v.AutoApplied || v.ActivatedAt.IsZero() || now.Sub(v.ActivatedAt) > time.Hour {
			continue
		}
		var e struct {
			Ceiling Ceiling `json:"ceiling"`
		}
		if json.Unmarshal(v.Evidence, &e) == nil && e.Ceiling.From > 0 {
			ref = e.Ceiling.From
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
