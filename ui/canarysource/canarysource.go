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

// Canaries is what a Source drives: the distribution plane
// (*distribution.Plane), which also tells its delivery ledger of every
// change so that the instances' states stay right, or a bare
// *distribution.Publisher (no ledger).
type Canaries interface {
	Canary(ctx context.Context, service string) (*watch.Canary, error)
	StartCanary(ctx context.Context, payload []byte, sel watch.Selector) (*rules.Envelope, error)
	SetCanarySelector(ctx context.Context, service string, version int64, sel watch.Selector) (*rules.Envelope, error)
	PromoteVersion(ctx context.Context, service string, version int64) (*rules.Envelope, error)
	AbortVersion(ctx context.Context, service string, version int64) (*rules.Envelope, error)
}

var (
	_ Canaries = (*distribution.Plane)(nil)
	_ Canaries = (*distribution.Publisher)(nil)
)

// Source is a model.Rollouts over the distribution plane.
type Source struct{ p Canaries }

var _ model.Rollouts = (*Source)(nil)

// New returns a Source.
func New(p Canaries) (*Source, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: a Plane or Publisher is required", ErrInvalid)
	}
	return &Source{p: p}, nil
}

// Canary returns the staged version, nil if none.
func (s *Source) Canary(ctx context.Context, service string) (*model.CanaryState, error) {
	c, err := s.p.Canary(ctx, service)
	if err != nil {
		return nil, translate(err, model.ErrInvalid)
	}
	if c == nil || c.Envelope == nil {
		return nil, nil
	}
	return &model.CanaryState{Version: c.Envelope.Version, Percent: c.Selector.Percent, Labels: c.Selector.Labels}, nil
}

// StartCanary stages v to percent of the instances. If v (the same content)
// already is the running canary, it changes the share the canary runs on:
// the publisher's StartCanary refuses a version it staged before, which
// the relay needs, but a person widens a running canary by staging it again.
func (s *Source) StartCanary(ctx context.Context, v versioning.Version, percent float64) error {
	if err := model.ValidPercent(percent); err != nil {
		return err
	}
	env, err := rules.NewEnvelope(v.Number, v.Ruleset)
	if err != nil {
		return fmt.Errorf("%w: version %d: %w", model.ErrInvalid, v.Number, err)
	}
	payload, err := json.Marshal(env)
	if err != nil {
		return err
	}
	sel := watch.Selector{Percent: percent}
	running, err := s.p.Canary(ctx, env.Service)
	if err != nil {
		return translate(err, model.ErrInvalid)
	}
	if running != nil && running.Envelope.Version == env.Version && running.Envelope.Checksum == env.Checksum {
		_, err = s.p.SetCanarySelector(ctx, env.Service, env.Version, sel)
	} else {
		_, err = s.p.StartCanary(ctx, payload, sel)
	}
	// A stale version here is the person's mistake (not newer than the
	// stable version or one staged before): invalid input.
	return translate(err, model.ErrInvalid)
}

// Promote writes the staged version, which must be version, to the stable
// key.
func (s *Source) Promote(ctx context.Context, service string, version int64) (int64, error) {
	env, err := s.p.PromoteVersion(ctx, service, version)
	if err != nil {
		// Stale here: another version is staged than the one the person
		// saw, or a newer stable version overtook it.
		return 0, translate(err, model.ErrConflict)
	}
	return env.Version, nil
}

// Abort deletes the canary key if it holds version.
func (s *Source) Abort(ctx context.Context, service string, version int64) (int64, error) {
	env, err := s.p.AbortVersion(ctx, service, version)
	if err != nil {
		return 0, translate(err, model.ErrConflict)
	}
	return env.Version, nil
}

// translate gives a publisher error the model's meaning, keeping its text,
// which says why: ErrStale becomes stale (model.ErrInvalid when the
// person's input is at fault, model.ErrConflict when the canary changed
// since they looked). Other errors, which the UI does not expect, are
// returned as they are (an internal error).
func translate(err error, stale error) error {
	var kind error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, distribution.ErrNoCanary):
		kind = model.ErrNotFound
	case errors.Is(err, distribution.ErrStale):
		kind = stale
	case errors.Is(err, distribution.ErrConflict):
		kind = model.ErrConflict
	case errors.Is(err, distribution.ErrInvalid):
		kind = model.ErrInvalid
	case errors.Is(err, distribution.ErrUnavailable):
		kind = model.ErrUnavailable
	default:
		return err
	}
	return fmt.Errorf("%w: %w", kind, err)
}
