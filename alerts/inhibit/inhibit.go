// Package inhibit mutes alerts that another, more urgent alert already
// explains: by default a firing P0 mutes the P1 and P2 alerts of the same
// service, so the on-call person gets one page about the cause.
package inhibit

import (
	"fmt"

	"governor.dev/governor/alerts"
)

// Rule mutes alerts matching Target while an alert matching Source fires
// with the same values of the Equal labels; as in Alertmanager, a label
// missing on both sides counts as equal (the empty value).
type Rule struct {
	Source alerts.Matchers `json:"source"`
	Target alerts.Matchers `json:"target"`
	Equal  []string        `json:"equal"`
}

// Validate names the first bad field, an Equal entry by its index
// (equal[1]).
func (r Rule) Validate() error {
	if len(r.Source) == 0 {
		return fmt.Errorf("%w: inhibit rule: source: at least one matcher is required", alerts.ErrInvalid)
	}
	if len(r.Target) == 0 {
		return fmt.Errorf("%w: inhibit rule: target: at least one matcher is required", alerts.ErrInvalid)
	}
	for i, e := range r.Equal {
		if _, err := alerts.NewMatcher(alerts.MatchEqual, e, ""); err != nil {
			return fmt.Errorf("%w: inhibit rule: equal[%d]: %q is not a label name: want [a-zA-Z_][a-zA-Z0-9_]*", alerts.ErrInvalid, i, e)
		}
	}
	return nil
}

// Defaults is the shipped rule: P0 mutes P1/P2 of the same service. The
// source must have a service: as in Alertmanager, an Equal label missing on
// both sides counts as equal, so a P0 of no service (a configured
// GovernorLeaderLost) would otherwise mute every P1/P2 of no service,
// GovernorAlertReceiverFailing among them.
func Defaults() []Rule {
	src, _ := alerts.NewMatcher(alerts.MatchEqual, alerts.SeverityLabel, string(alerts.P0))
	svc, _ := alerts.NewMatcher(alerts.MatchRegexp, "service", ".+")
	tgt, _ := alerts.NewMatcher(alerts.MatchRegexp, alerts.SeverityLabel, "P1|P2")
	return []Rule{{Source: alerts.Matchers{src, svc}, Target: alerts.Matchers{tgt}, Equal: []string{"service"}}}
}

// Inhibitor applies rules to a snapshot of alerts.
type Inhibitor struct{ rules []Rule }

// New validates the rules.
func New(rules []Rule) (*Inhibitor, error) {
	for i, r := range rules {
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("inhibit_rules[%d]: %w", i, err)
		}
	}
	return &Inhibitor{rules: rules}, nil
}

// MutedBy returns the fingerprint of a firing alert in firing that mutes
// target, and whether there is one. An alert never mutes itself, and, as in
// Alertmanager, a target that matches a rule's source as well is not muted
// by a source that matches its target as well: two such alerts (two
// fleet-wide breakers of one service under "a fleet breaker mutes its
// service's P1 and P2") would otherwise mute each other and neither page.
func (in *Inhibitor) MutedBy(target alerts.Labels, firing []alerts.Alert) (alerts.Fingerprint, bool) {
	tfp := target.Fingerprint()
	for _, r := range in.rules {
		if !r.Target.Matches(target) {
			continue
		}
		twoSided := r.Source.Matches(target)
		for _, src := range firing {
			if !src.EndsAt.IsZero() || !r.Source.Matches(src.Labels) || (twoSided && r.Target.Matches(src.Labels)) {
				continue
			}
			fp := src.Fingerprint()
			if fp == tfp {
				continue
			}
			equal := true
			for _, e := range r.Equal {
				if src.Labels[e] != target[e] {
					equal = false
					break
				}
			}
			if equal {
				return fp, true
			}
		}
	}
	return 0, false
}
