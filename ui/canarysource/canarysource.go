// Package canarysource adapts the distribution plane's Publisher (the
// JetStream KV canary keys) to the UI's model.Rollouts: start a canary of a
// version for a share of the instances, promote it, abort it.
package canarysource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"governor.dev/governor/rules/distribution"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/sdk/watch"
	"governor.dev/governor/ui/model"
)

// ErrInvalid: bad options.
var ErrInvalid = errors.New("canarysource: invalid options")

// Source is a model.Rollouts over a Publisher.
type Source struct{ p *distribution.Publisher }

var _ model.Rollouts = (*Source)(nil)

// New returns a Source.
func New(p *distribution.Publisher) (*Source, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: a Publisher is required", ErrInvalid)
	}
	return &Source{p: p}, nil
}

// Canary returns the staged version, nil if none.
func (s *Source) Canary(ctx context.Context, service string) (*model.CanaryState, error) {
	c, err := s.p.Canary(ctx, service)
	if err != nil || c == nil || c.Envelope == nil {
		return nil, err
	}
	return &model.CanaryState{Version: c.Envelope.Version, Percent: c.Selector.Percent, Labels: c.Selector.Labels}, nil
}

// StartCanary stages v to percent of the instances.
func (s *Source) StartCanary(ctx context.Context, v versioning.Version, percent float64) error {
	if percent <= 0 || percent >= 100 {
		return fmt.Errorf("%w: percent: must be above 0 and below 100", model.ErrInvalid)
	}
	env, err := rules.NewEnvelope(v.Number, v.Ruleset)
	if err != nil {
		return fmt.Errorf("%w: version %d: %w", model.ErrInvalid, v.Number, err)
	}
	payload, err := json.Marshal(env)
	if err != nil {
		return err
	}
	_, err = s.p.StartCanary(ctx, payload, watch.Selector{Percent: percent})
	return err
}

// Promote writes the staged version to the stable key.
func (s *Source) Promote(ctx context.Context, service string) (int64, error) {
	env, err := s.p.Promote(ctx, service)
	if err != nil {
		return 0, err
	}
	return env.Version, nil
}

// Abort deletes the canary key.
func (s *Source) Abort(ctx context.Context, service string) (int64, error) {
	env, err := s.p.Abort(ctx, service)
	if err != nil {
		return 0, err
	}
	if env == nil {
		return 0, nil
	}
	return env.Version, nil
}
