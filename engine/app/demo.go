package app

import (
	"context"
	"errors"
	"time"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/rules"
)

// The people of the demo: one proposes, another approves (four eyes).
var (
	demoOperator = versioning.Actor{Name: "demo-operator", Roles: []versioning.Role{versioning.RoleOperator}}
	demoApprover = versioning.Actor{Name: "demo-approver", Roles: []versioning.Role{versioning.RoleApprover}}
)

// runDemo seeds each demo service with an approved first version and,
// after Demo.BadVersionAfter, publishes a bad version of catalog.
func (a *App) runDemo(ctx context.Context) {
	svcs := a.fleet.Services()
	for _, s := range svcs {
		if err := a.seed(ctx, s.Name, s.Ruleset(a.cfg.Demo.Instances)); err != nil && ctx.Err() == nil {
			a.log.Error("demo: seed", "service", s.Name, "err", err)
		}
	}
	if a.cfg.Demo.BadVersionAfter <= 0 {
		return
	}
	t := a.o.Clock.NewTimer(a.cfg.Demo.BadVersionAfter)
	select {
	case <-ctx.Done():
		t.Stop()
		return
	case <-t.C():
	}
	if v, err := a.PublishBadVersion(ctx, "catalog"); err != nil {
		if ctx.Err() == nil {
			a.log.Error("demo: bad version", "err", err)
		}
	} else {
		a.log.Warn("demo: published a deliberately bad version; the guardrail should roll it back",
			"service", v.Service, "version", v.Number)
	}
}

// seed proposes and approves the first version of a service that has none.
func (a *App) seed(ctx context.Context, service string, rs *rules.Ruleset) error {
	if _, err := a.store.Active(ctx, service); err == nil || !errors.Is(err, versioning.ErrNotFound) {
		return err
	}
	p, err := a.store.Propose(ctx, versioning.Proposal{Ruleset: rs, Author: demoOperator, Rebase: true,
		Reason: "demo: starting rules"})
	if err != nil {
		return err
	}
	_, err = a.store.Approve(ctx, service, p.Number, demoApprover, "demo: looks right")
	return err
}

// PublishBadVersion proposes and approves a version of service whose
// concurrency limit is fixed at 2 per instance and whose rate limit is a
// tenth of the active one: most traffic is refused and goodput collapses,
// which the guardrail must catch.
func (a *App) PublishBadVersion(ctx context.Context, service string) (versioning.Version, error) {
	act, err := a.store.Active(ctx, service)
	if err != nil {
		return versioning.Version{}, err
	}
	rs := act.Ruleset.Clone()
	for i := range rs.Routes {
		rs.Routes[i].Concurrency = &rules.Concurrency{Algorithm: rules.AlgorithmFixed, Initial: 2, Min: 1, Max: 2}
		rs.Routes[i].Queue = nil
		if rl := rs.Routes[i].RateLimit; rl != nil {
			rl.Rate = max(rl.Rate/10, 1)
			rl.Burst = 0
		}
	}
	p, err := a.store.Propose(ctx, versioning.Proposal{Ruleset: rs, Author: demoOperator, Rebase: true,
		Reason: "demo: a deliberately bad change (concurrency fixed at 2, a tenth of the rate)"})
	if err != nil {
		return versioning.Version{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return a.store.Approve(ctx, service, p.Number, demoApprover, "demo: approved without looking")
}
