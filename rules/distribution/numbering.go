package distribution

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"

	"governor.dev/governor/rules/versioning"
)

// numberingActor is the audit actor of the renumberings the relay asks of
// the rules store (the store's own relay actor).
var numberingActor = versioning.Actor{Name: "system:outbox-relay"}

// highest returns, per service, the highest version number the bucket
// holds or held: the stable key's version and every canary in the canary
// key's history (StartCanary refuses a version not above them). service, if
// not empty, selects one service.
func (p *Publisher) highest(ctx context.Context, service string) (map[string]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	var (
		w   jetstream.KeyWatcher
		err error
	)
	if service == "" {
		w, err = p.kv.WatchAll(ctx, jetstream.IncludeHistory())
	} else {
		w, err = p.kv.Watch(ctx, p.names.ServiceKeys(service), jetstream.IncludeHistory())
	}
	if err != nil {
		return nil, fmt.Errorf("%w: read bucket %s: %w", ErrUnavailable, p.names.Bucket(), err)
	}
	defer func() { _ = w.Stop() }()
	out := map[string]int64{}
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: read bucket %s: %w", ErrUnavailable, p.names.Bucket(), ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("%w: read bucket %s: the watch ended", ErrUnavailable, p.names.Bucket())
			}
			if e == nil {
				return out, nil // every stored entry seen
			}
			if e.Operation() != jetstream.KeyValuePut {
				continue
			}
			var svc string
			var version int64
			if c, ok := stagedIn(e); ok && e.Key() == p.names.CanaryKey(c.Envelope.Service) {
				svc, version = c.Envelope.Service, c.Envelope.Version
			} else if env, ok := versionIn(e.Value()); ok && e.Key() == p.names.StableKey(env.Service) {
				svc, version = env.Service, env.Version
			}
			if svc == "" || (service != "" && svc != service) {
				continue
			}
			out[svc] = max(out[svc], version)
		}
	}
}

// servicesLister is the part of a rules store (versioning.Reader) the
// relay reads before raising numbering: one read instead of a write
// transaction per service when nothing needs raising.
type servicesLister interface {
	Services(ctx context.Context) ([]versioning.ServiceInfo, error)
}

// storeLatest returns, per service, the highest version number the store
// has (ServiceInfo.Latest), when the Outbox can tell (servicesLister);
// the store numbers its next version above it, so a bucket version at or
// below it needs no raise. An error is logged and taken as knowing
// nothing: every service is then raised as before.
func (r *Relay) storeLatest(ctx context.Context) map[string]int64 {
	l, ok := r.o.Outbox.(servicesLister)
	if !ok {
		return nil
	}
	ss, err := l.Services(ctx)
	if err != nil {
		r.o.Logger.LogAttrs(ctx, slog.LevelWarn, "rules store services not read: raising the numbering of every service in the bucket",
			slog.Any("err", err))
		return nil
	}
	out := make(map[string]int64, len(ss))
	for _, s := range ss {
		out[s.Name] = s.Latest
	}
	return out
}

// raiseNumbering raises the rules store's numbering of every service the
// bucket holds (or of service, if not empty) to the highest version the
// bucket holds or held, so that the next version the store creates is
// delivered rather than refused as a conflict: after the rules database was
// reset or restored from a backup, its own numbering is below the fleet's.
// It does nothing when the Outbox is not a store that numbers versions
// (versioning.Numbering). When the Outbox lists its services
// (versioning.Reader's Services), a service whose highest version is at or
// above the bucket's is skipped without a write: a start-up with nothing
// to raise reads the store once.
func (r *Relay) raiseNumbering(ctx context.Context, service string) error {
	n, ok := r.o.Outbox.(versioning.Numbering)
	if !ok {
		return nil
	}
	hs, err := r.o.Publisher.highest(ctx, service)
	if err != nil {
		r.m.failures.WithLabelValues("renumber").Inc()
		return fmt.Errorf("distribution: raise the rules store's numbering: %w", err)
	}
	covered := r.storeLatest(ctx)
	var errs []error
	for svc, h := range hs {
		if covered[svc] >= h {
			continue // the store has a version at or above it: nothing to raise
		}
		reason := fmt.Sprintf("the NATS bucket %s holds version %d of %s, above the rules store's numbering "+
			"(was the rules database reset or restored from a backup?); seen by relay %s", r.o.Publisher.Names().Bucket(), h, svc, r.o.Name)
		last, raised, err := n.RaiseNumbering(ctx, svc, h, numberingActor, truncate(reason, versioning.MaxReasonBytes))
		if err != nil {
			r.m.failures.WithLabelValues("renumber").Inc()
			errs = append(errs, fmt.Errorf("distribution: raise the numbering of %s to %d: %w", svc, h, err))
			continue
		}
		if raised {
			r.m.renumbered.Inc()
			r.o.Logger.LogAttrs(ctx, slog.LevelWarn,
				"rules store numbering raised to the bucket's version: its next version of the service is numbered above it (rules database reset or restored?)",
				slog.String("service", svc), slog.Int64("bucket_version", h), slog.Int64("next", last+1))
		}
	}
	return errors.Join(errs...)
}
