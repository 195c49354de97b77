package distribution

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/sdk/watch"
)

// PlaneOptions wire the distribution side of the control plane. Conn,
// Outbox and Store are required.
type PlaneOptions struct {
	Conn *nats.Conn
	// Names gives the bucket and subjects; the zero value uses the default
	// prefix.
	Names  watch.Names
	Outbox versioning.Outbox
	Store  LedgerStore
	// Wake, Batch, Lease, Sweep and Stage go to the Relay (RelayOptions).
	Wake  <-chan struct{}
	Batch int
	Lease time.Duration
	Sweep time.Duration
	Stage func(ctx context.Context, item versioning.OutboxItem) (*watch.Selector, error)
	// OnUndeliverable goes to the Relay: it hears once of every row the
	// relay gives up on (Plane.Undeliverable lists them).
	OnUndeliverable func(ctx context.Context, u Undeliverable)
	// RelayName goes to the Relay (RelayOptions.Name).
	RelayName string
	// Replicas of the bucket (3 on a production cluster); default 1.
	Replicas int
	// Grace, GoneAfter, ForgetAfter and TransitionRetention go to the
	// Ledger (LedgerOptions).
	Grace, GoneAfter    time.Duration
	ForgetAfter         time.Duration
	TransitionRetention time.Duration
	Clock               clock.Clock
	Logger              *slog.Logger
	Registerer          prometheus.Registerer
}

// Plane is the relay, the publisher and the ledger together, with the
// rollout operations that keep the ledger in step with the bucket.
type Plane struct {
	pub    *Publisher
	relay  *Relay
	ledger *Ledger
	nc     *nats.Conn
}

// NewPlane creates the bucket and wires the parts.
func NewPlane(ctx context.Context, o PlaneOptions) (*Plane, error) {
	if o.Conn == nil || o.Outbox == nil || o.Store == nil {
		return nil, fmt.Errorf("%w: plane: Conn, Outbox and Store are required", ErrInvalid)
	}
	js, err := jetstream.New(o.Conn)
	if err != nil {
		return nil, fmt.Errorf("%w: jetstream: %w", ErrUnavailable, err)
	}
	pub, err := NewPublisher(ctx, js, PublisherOptions{Names: o.Names, Replicas: o.Replicas})
	if err != nil {
		return nil, err
	}
	lo := LedgerOptions{Store: o.Store, Names: o.Names, Grace: o.Grace, GoneAfter: o.GoneAfter,
		ForgetAfter: o.ForgetAfter, TransitionRetention: o.TransitionRetention, Latest: LatestFrom(pub),
		Staged: pub.Canary, Clock: o.Clock, Logger: o.Logger, Registerer: o.Registerer}
	if g, ok := o.Outbox.(versionGetter); ok {
		// The ledger compares the content instances run with the store's.
		lo.Checksum = checksumFrom(g)
	}
	ledger, err := NewLedger(lo)
	if err != nil {
		return nil, err
	}
	relay, err := NewRelay(RelayOptions{Outbox: o.Outbox, Publisher: pub, Wake: o.Wake, Batch: o.Batch, Lease: o.Lease,
		Sweep: o.Sweep, Stage: o.Stage, OnPublished: ledger.Published, OnUndeliverable: o.OnUndeliverable,
		Name: o.RelayName, Clock: o.Clock, Logger: o.Logger, Registerer: o.Registerer})
	if err != nil {
		return nil, err
	}
	return &Plane{pub: pub, relay: relay, ledger: ledger, nc: o.Conn}, nil
}

// Publisher returns the publisher.
func (p *Plane) Publisher() *Publisher { return p.pub }

// Ledger returns the ledger.
func (p *Plane) Ledger() *Ledger { return p.ledger }

// Undeliverable lists the outbox rows the store records as undeliverable:
// versions too large for the NATS server, with an invalid payload or in
// conflict with the version of the same number in the bucket, not
// published and not retried, and not superseded yet by a newer version;
// newest first, of one service unless service is empty
// (Relay.Undeliverable).
func (p *Plane) Undeliverable(ctx context.Context, service string) ([]Undeliverable, error) {
	return p.relay.Undeliverable(ctx, service)
}

// Run runs the relay and the ledger until ctx ends.
func (p *Plane) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); errs[0] = p.relay.Run(ctx) }()
	go func() { defer wg.Done(); errs[1] = p.ledger.Run(ctx, p.nc) }()
	wg.Wait()
	return errors.Join(errs...)
}

// StartCanary stages a version (an envelope, e.g. a store version's
// payload) to the instances sel picks.
func (p *Plane) StartCanary(ctx context.Context, payload []byte, sel watch.Selector) (*rules.Envelope, error) {
	env, err := p.pub.StartCanary(ctx, payload, sel)
	if err != nil {
		return nil, err
	}
	return env, p.ledger.Published(ctx, env, &sel)
}

// Canary returns the staged version of a service; (nil, nil) if none.
func (p *Plane) Canary(ctx context.Context, service string) (*watch.Canary, error) {
	return p.pub.Canary(ctx, service)
}

// SetCanarySelector changes the instances the running canary of version
// runs on (Publisher.SetCanarySelector), and tells the ledger.
func (p *Plane) SetCanarySelector(ctx context.Context, service string, version int64, sel watch.Selector) (*rules.Envelope, error) {
	env, err := p.pub.SetCanarySelector(ctx, service, version, sel)
	if err != nil {
		return nil, err
	}
	return env, p.ledger.Published(ctx, env, &sel)
}

// Promote publishes a service's staged version to every instance.
func (p *Plane) Promote(ctx context.Context, service string) (*rules.Envelope, error) {
	env, err := p.pub.Promote(ctx, service)
	return p.promoted(ctx, env, err)
}

// PromoteVersion is Promote of the canary of version, the one the caller
// looked at (Publisher.PromoteVersion).
func (p *Plane) PromoteVersion(ctx context.Context, service string, version int64) (*rules.Envelope, error) {
	env, err := p.pub.PromoteVersion(ctx, service, version)
	return p.promoted(ctx, env, err)
}

// promoted tells the ledger of a promotion that succeeded (err nil).
func (p *Plane) promoted(ctx context.Context, env *rules.Envelope, err error) (*rules.Envelope, error) {
	if err != nil {
		return nil, err
	}
	return env, p.ledger.Published(ctx, env, nil)
}

// Abort withdraws a service's staged version.
func (p *Plane) Abort(ctx context.Context, service string) (*rules.Envelope, error) {
	env, err := p.pub.Abort(ctx, service)
	return p.aborted(ctx, service, env, err)
}

// AbortVersion is Abort of the canary of version, the one the caller looked
// at (Publisher.AbortVersion).
func (p *Plane) AbortVersion(ctx context.Context, service string, version int64) (*rules.Envelope, error) {
	env, err := p.pub.AbortVersion(ctx, service, version)
	return p.aborted(ctx, service, env, err)
}

// aborted tells the ledger of an abort that succeeded (err nil).
func (p *Plane) aborted(ctx context.Context, service string, env *rules.Envelope, err error) (*rules.Envelope, error) {
	if err != nil {
		return nil, err
	}
	return env, p.ledger.aborted(ctx, service, env.Version)
}
