package distribution

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/sdk/watch"
)

// RelayOptions configure a Relay. Outbox and Publisher are required.
type RelayOptions struct {
	Outbox    versioning.Outbox
	Publisher *Publisher
	// Wake receives a value whenever another process wrote an outbox row
	// (ListenPostgres); Outbox.OutboxReady is always watched as well.
	Wake <-chan struct{}
	// Batch is the most rows claimed at once; default 100.
	Batch int
	// Lease is how long a claimed row is reserved; default 30s. A relay that
	// dies leaves its rows to the next claim after the lease.
	Lease time.Duration
	// Sweep is the safety-net period between claims without a wake-up;
	// default 5s.
	Sweep time.Duration
	// RetryWait is the first wait before a row whose publication failed is
	// tried again by this relay (it keeps the row's lease), doubled per failed
	// pass up to Sweep; default 250ms.
	RetryWait time.Duration
	// Stage, when set, decides per row whether the version goes to a canary
	// first (a non-nil selector) instead of every instance.
	Stage func(ctx context.Context, item versioning.OutboxItem) (*watch.Selector, error)
	// OnPublished is called after a version reached the bucket (or was
	// already there), before the row is marked done; the Ledger's Published
	// fits.
	OnPublished func(ctx context.Context, env *rules.Envelope, canary *watch.Selector) error
	Clock       clock.Clock
	Logger      *slog.Logger
	Registerer  prometheus.Registerer
}

// DefaultRelayOptions returns the defaults of the optional fields.
func DefaultRelayOptions() RelayOptions {
	return RelayOptions{Batch: 100, Lease: 30 * time.Second, Sweep: 5 * time.Second, RetryWait: 250 * time.Millisecond,
		Clock: clock.Real{}, Logger: slog.New(slog.DiscardHandler)}
}

// Relay moves outbox rows to NATS.
type Relay struct {
	o RelayOptions
	m relayMetrics

	mu    sync.Mutex
	retry []versioning.OutboxItem // rows whose publication failed, still leased
}

type relayMetrics struct {
	rows      *prometheus.CounterVec // outcome
	failures  *prometheus.CounterVec // stage
	passes    prometheus.Counter
	lastBatch prometheus.Gauge
}

// NewRelay checks the options and returns a relay.
func NewRelay(o RelayOptions) (*Relay, error) {
	d := DefaultRelayOptions()
	if o.Outbox == nil || o.Publisher == nil {
		return nil, fmt.Errorf("%w: relay: Outbox and Publisher are required", ErrInvalid)
	}
	if o.Batch < 0 || o.Lease < 0 || o.Sweep < 0 || o.RetryWait < 0 {
		return nil, fmt.Errorf("%w: relay: Batch, Lease, Sweep and RetryWait must not be negative", ErrInvalid)
	}
	if o.RetryWait == 0 {
		o.RetryWait = d.RetryWait
	}
	if o.Batch == 0 {
		o.Batch = d.Batch
	}
	if o.Lease == 0 {
		o.Lease = d.Lease
	}
	if o.Sweep == 0 {
		o.Sweep = d.Sweep
	}
	if o.Clock == nil {
		o.Clock = d.Clock
	}
	if o.Logger == nil {
		o.Logger = d.Logger
	}
	reg := o.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	f := promauto.With(reg)
	r := &Relay{o: o, m: relayMetrics{
		rows: f.NewCounterVec(prometheus.CounterOpts{Name: "governor_distribution_relay_rows_total",
			Help: "Outbox rows relayed, by outcome: published, duplicate, superseded, canary."}, []string{"outcome"}),
		failures: f.NewCounterVec(prometheus.CounterOpts{Name: "governor_distribution_relay_failures_total",
			Help: "Relay failures by stage: claim, publish, mark. The row is retried after its lease."}, []string{"stage"}),
		passes: f.NewCounter(prometheus.CounterOpts{Name: "governor_distribution_relay_passes_total",
			Help: "Claim passes over the outbox."}),
		lastBatch: f.NewGauge(prometheus.GaugeOpts{Name: "governor_distribution_relay_last_batch_rows",
			Help: "Rows claimed by the last pass."}),
	}}
	for _, s := range []Outcome{Published, Duplicate, Superseded, Staged} {
		r.m.rows.WithLabelValues(string(s))
	}
	for _, s := range []string{"claim", "publish", "mark"} {
		r.m.failures.WithLabelValues(s)
	}
	return r, nil
}

// Run relays until ctx ends: a pass at start, on every wake-up and every
// Sweep, and sooner (RetryWait, doubling) while publications fail. It
// returns nil when ctx ends.
func (r *Relay) Run(ctx context.Context) error {
	ready := r.o.Outbox.OutboxReady()
	backoff := r.o.RetryWait
	for {
		n, err := r.Pass(ctx)
		if ctx.Err() != nil {
			return nil
		}
		wait := r.o.Sweep
		if err != nil {
			r.o.Logger.LogAttrs(ctx, slog.LevelWarn, "relay pass failed", slog.Any("err", err))
			wait, backoff = backoff, min(2*backoff, r.o.Sweep)
		} else {
			backoff = r.o.RetryWait
			if n == r.o.Batch {
				continue // a full batch: more rows are probably waiting
			}
		}
		t := r.o.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-ready:
		case <-r.o.Wake:
		case <-t.C():
		}
		t.Stop()
	}
}

// Pass retries the rows whose publication failed earlier, then claims one
// batch and relays it; it returns how many rows it claimed. Rows that fail
// stay leased and are kept for the next pass; if this relay dies, another
// claims them when the lease expires.
func (r *Relay) Pass(ctx context.Context) (int, error) {
	r.m.passes.Inc()
	r.mu.Lock()
	items := r.retry
	r.retry = nil
	r.mu.Unlock()
	claimed, err := r.o.Outbox.ClaimOutbox(ctx, r.o.Batch, r.o.Lease)
	var errs []error
	if err != nil {
		r.m.failures.WithLabelValues("claim").Inc()
		errs = append(errs, fmt.Errorf("distribution: claim outbox: %w", err))
	}
	r.m.lastBatch.Set(float64(len(claimed)))
	for _, it := range claimed {
		if !slices.ContainsFunc(items, func(o versioning.OutboxItem) bool { return o.ID == it.ID }) {
			items = append(items, it)
		}
	}
	var failed []versioning.OutboxItem
	for _, it := range items {
		if err := r.relay(ctx, it); err != nil {
			errs = append(errs, err)
			failed = append(failed, it)
		}
	}
	r.mu.Lock()
	r.retry = append(r.retry, failed...)
	r.mu.Unlock()
	return len(claimed), errors.Join(errs...)
}

func (r *Relay) relay(ctx context.Context, it versioning.OutboxItem) error {
	log := r.o.Logger.With(slog.String("service", it.Service), slog.Int64("version", it.Version), slog.Int64("outbox_id", it.ID))
	var sel *watch.Selector
	if r.o.Stage != nil {
		s, err := r.o.Stage(ctx, it)
		if err != nil {
			r.m.failures.WithLabelValues("publish").Inc()
			return fmt.Errorf("distribution: stage %s v%d: %w", it.Service, it.Version, err)
		}
		sel = s
	}
	env, err := rules.DecodeEnvelope(it.Payload)
	if err == nil && (env.Service != it.Service || env.Version != it.Version) {
		err = fmt.Errorf("outbox row %d says %s v%d but its payload is %s v%d", it.ID, it.Service, it.Version, env.Service, env.Version)
	}
	if err != nil {
		r.m.failures.WithLabelValues("publish").Inc()
		return fmt.Errorf("%w: outbox row %d: %w", ErrInvalid, it.ID, err)
	}
	outcome := Staged
	if sel != nil {
		_, err = r.o.Publisher.StartCanary(ctx, it.Payload, *sel)
		if errors.Is(err, ErrStale) {
			sel = nil // the stable key already has this or a newer version: nothing to stage
		}
	}
	if sel == nil {
		outcome, _, err = r.o.Publisher.Publish(ctx, it.Payload)
	}
	if err != nil {
		r.m.failures.WithLabelValues("publish").Inc()
		return fmt.Errorf("distribution: publish %s v%d: %w", it.Service, it.Version, err)
	}
	if r.o.OnPublished != nil && outcome != Superseded {
		if err := r.o.OnPublished(ctx, env, sel); err != nil {
			log.LogAttrs(ctx, slog.LevelWarn, "ledger not told of a publication", slog.Any("err", err))
		}
	}
	if err := r.o.Outbox.MarkOutboxDone(ctx, it.ID); err != nil {
		r.m.failures.WithLabelValues("mark").Inc()
		return fmt.Errorf("distribution: mark outbox row %d done: %w", it.ID, err)
	}
	r.m.rows.WithLabelValues(string(outcome)).Inc()
	log.LogAttrs(ctx, slog.LevelInfo, "rule version relayed", slog.String("outcome", string(outcome)))
	return nil
}
