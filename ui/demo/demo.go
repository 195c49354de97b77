// Package demo gives the web UI something to show without a fleet: a few
// services with rule versions, an engine proposal with evidence, and a
// scripted incident (the load score of one service climbs, it sheds, a P1
// alert fires, then it recovers), driven by an injected clock. cmd/web -demo
// and the end-to-end tests use it; production never does.
package demo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/ui/model"
)

// ErrInvalid: bad options.
var ErrInvalid = errors.New("demo: invalid options")

// Options configure Seed and Run.
type Options struct {
	Rules  versioning.Store
	Fleet  *model.StaticFleet
	Alerts *model.MemoryAlerts
	Clock  clock.Clock
	// Services is how many services the fleet has; default 6.
	Services int
	// Interval between steps of Run; default 1s.
	Interval time.Duration
	// IncidentAt is the step at which the incident starts; default 5.
	IncidentAt int
}

func (o Options) withDefaults() (Options, error) {
	if o.Rules == nil || o.Fleet == nil || o.Alerts == nil {
		return o, fmt.Errorf("%w: Rules, Fleet and Alerts are required", ErrInvalid)
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Services <= 0 {
		o.Services = 6
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.IncidentAt <= 0 {
		o.IncidentAt = 5
	}
	return o, nil
}

// Names of the demo services; the first has the incident.
var Names = []string{"checkout", "payments", "search", "catalog", "accounts", "shipping", "reviews", "inventory"}

func name(i int) string {
	if i < len(Names) {
		return Names[i]
	}
	return fmt.Sprintf("service-%03d", i)
}

var (
	seeder   = versioning.Actor{Name: "demo-seed", Roles: []versioning.Role{versioning.RoleOperator}}
	approver = versioning.Actor{Name: "demo-approver", Roles: []versioning.Role{versioning.RoleApprover}}
	engine   = versioning.Actor{Name: "engine", Roles: []versioning.Role{versioning.RoleOperator}}
)

// Ruleset is the demo ruleset of a service with the given rate limit.
func Ruleset(service string, rate float64) *rules.Ruleset {
	return &rules.Ruleset{Service: service, Routes: []rules.Route{{
		Name: "api", Match: rules.Match{PathPrefix: "/api"}, RateLimit: &rules.RateLimit{Rate: rate},
	}}}
}

// Seed gives each service an approved v1 and the first service a live v2
// and an open engine proposal v3 with evidence. It is a no-op for services
// that already have versions.
func Seed(ctx context.Context, o Options) error {
	o, err := o.withDefaults()
	if err != nil {
		return err
	}
	for i := range o.Services {
		svc := name(i)
		if _, err := o.Rules.Active(ctx, svc); err == nil {
			continue
		} else if !errors.Is(err, versioning.ErrNotFound) {
			return err
		}
		v, err := o.Rules.Propose(ctx, versioning.Proposal{Ruleset: Ruleset(svc, 400), Author: seeder, Reason: "initial limits"})
		if err != nil {
			return err
		}
		if _, err := o.Rules.Approve(ctx, svc, v.Number, approver, "initial"); err != nil {
			return err
		}
		if i != 0 {
			continue
		}
		v2, err := o.Rules.Propose(ctx, versioning.Proposal{BaseVersion: v.Number, Ruleset: Ruleset(svc, 500), Author: seeder, Reason: "holiday traffic"})
		if err != nil {
			return err
		}
		if _, err := o.Rules.Approve(ctx, svc, v2.Number, approver, "ok for the holidays"); err != nil {
			return err
		}
		evidence, err := EngineEvidence(svc, o.Clock.Now(), 500, 350)
		if err != nil {
			return err
		}
		if _, err := o.Rules.Propose(ctx, versioning.Proposal{BaseVersion: v2.Number, Ruleset: Ruleset(svc, 350), Author: engine,
			Source: versioning.SourceEngine, Reason: "load score 0.91 above 0.80: lower the rate limit", Evidence: evidence}); err != nil {
			return err
		}
	}
	return nil
}

// incident is the first service's load score d steps into the incident
// cycle (60 steps): 10 steps climbing to 0.92, 20 at the peak, 10 falling
// back, 20 calm.
func incident(d int) float64 {
	if d < 0 {
		return 0.3
	}
	switch d %= 60; {
	case d < 10:
		return 0.3 + 0.062*float64(d)
	case d < 30:
		return 0.92
	case d < 40:
		return 0.92 - 0.062*float64(d-30)
	}
	return 0.3
}

// Snapshot is the fleet at a step: calm, then from IncidentAt the first
// service goes through the incident cycle again and again.
func Snapshot(o Options, step int, now time.Time, trend map[string][]model.Point) []model.ServiceStatus {
	out := make([]model.ServiceStatus, o.Services)
	for i := range o.Services {
		svc := name(i)
		score := 0.25 + 0.1*math.Sin(float64(step+i*3)/4)
		if i == 0 {
			score = incident(step - o.IncidentAt)
		}
		score = math.Round(score*1000) / 1000
		rate := 800 + 200*float64(i)
		p99 := 0.08 + 0.3*score*score
		errs := 0.001 + 0.02*math.Max(0, score-0.7)
		shed := map[string]float64{"sheddable": math.Max(0, score-0.75) * 2, "critical": 0}
		pts := append(trend[svc], model.Point{At: now, Value: score})
		if len(pts) > 30 {
			pts = pts[len(pts)-30:]
		}
		trend[svc] = pts
		s := model.ServiceStatus{
			Name: svc, LoadScore: &score, Overloaded: score > 0.8, Trend: pts,
			RequestRate: &rate, P99: &p99, ErrorRatio: &errs, ShedByClass: shed,
			Terms: []model.Term{
				{Name: "cpu", Value: score, Weight: 0.4, Contribution: 0.4 * score},
				{Name: "memory", Value: 0.4, Weight: 0.3, Contribution: 0.12},
				{Name: "latency", Value: math.Min(1, p99/0.4), Weight: 0.3, Contribution: 0.3 * math.Min(1, p99/0.4)},
			},
			Rollout: model.Rollout{Synced: Instances},
		}
		if d := step - o.IncidentAt; i == 0 && d >= 0 && d%60 < 3 {
			s.Rollout = model.Rollout{Synced: Instances - 3, Pending: 3}
		}
		out[i] = s
	}
	return out
}

// Run steps the fleet every Interval until ctx ends; in each incident cycle
// a P1 alert fires when the first service's score passes 0.8 and resolves
// when the cycle calms down.
func Run(ctx context.Context, o Options) error {
	o, err := o.withDefaults()
	if err != nil {
		return err
	}
	trend := map[string][]model.Point{}
	firing := ""
	for step := 0; ; step++ {
		now := o.Clock.Now()
		snap := Snapshot(o, step, now, trend)
		o.Fleet.Set(snap, nil)
		for _, st := range snap {
			o.Fleet.SetInstances(st.Name, instances(ctx, o, st, now))
		}
		switch s := snap[0]; {
		case firing == "" && *s.LoadScore > 0.8:
			firing = fmt.Sprintf("%s-p99-%d", s.Name, step)
			o.Alerts.Fire(model.Alert{ID: firing, Tier: model.P1, Service: s.Name,
				Summary: fmt.Sprintf("%s: load score %.2f, p99 %.0f ms above target", s.Name, *s.LoadScore, *s.P99*1000)})
		case firing != "" && *s.LoadScore < 0.5:
			o.Alerts.Resolve(firing)
			firing = ""
		}
		t := o.Clock.NewTimer(o.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
}

// instances lists a service's demo instances matching its rollout counts:
// synced ones run the active version, pending ones the one before; with no
// version published, every one is UNPUBLISHED.
func instances(ctx context.Context, o Options, st model.ServiceStatus, now time.Time) []model.Instance {
	var target int64
	if v, err := o.Rules.Active(ctx, st.Name); err == nil {
		target = v.Number
	}
	out := make([]model.Instance, 0, st.Rollout.Total())
	add := func(n int, state string, running int64) {
		for range n {
			out = append(out, model.Instance{Name: fmt.Sprintf("%s-%02d", st.Name, len(out)+1), State: state,
				Running: running, Target: target, Since: now, LastSeen: now})
		}
	}
	if target == 0 { // nothing published: the instances run the SDK defaults
		add(st.Rollout.Total(), "UNPUBLISHED", 0)
		return out
	}
	add(st.Rollout.Synced, "SYNCED", target)
	add(st.Rollout.Pending, "PENDING", max(target-1, 0))
	return out
}
