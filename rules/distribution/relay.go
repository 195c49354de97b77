package distribution

import (
	"cmp"
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
	// OnUndeliverable is called once when the relay gives up on a row (see
	// Undeliverable).
	OnUndeliverable func(ctx context.Context, u Undeliverable)
	Clock           clock.Clock
	Logger          *slog.Logger
	Registerer      prometheus.Registerer
}

// DefaultRelayOptions returns the defaults of the optional fields.
func DefaultRelayOptions() RelayOptions {
	return RelayOptions{Batch: 100, Lease: 30 * time.Second, Sweep: 5 * time.Second, RetryWait: 250 * time.Millisecond,
		Clock: clock.Real{}, Logger: slog.New(slog.DiscardHandler)}
}

// errBadRow marks a row whose payload is not a valid envelope of the row's
// service and version: retrying cannot help.
var errBadRow = errors.New("payload is not the row's envelope")

// Relay moves outbox rows to NATS.
type Relay struct {
	o RelayOptions
	m relayMetrics

	mu    sync.Mutex
	retry []versioning.OutboxItem // rows whose publication failed, still leased
	dead  map[int64]Undeliverable // rows given up on, by outbox id
}

type relayMetrics struct {
	rows          *prometheus.CounterVec // outcome
	failures      *prometheus.CounterVec // stage
	passes        prometheus.Counter
	lastBatch     prometheus.Gauge
	undeliverable prometheus.Gauge
}

// Reasons a row is undeliverable.
const (
	// ReasonTooLarge: the value is larger than the server's max_payload
	// allows (Size and Limit say by how much).
	ReasonTooLarge = "too_large"
	// ReasonInvalid: the row's payload is not a valid envelope of the row's
	// service and version.
	ReasonInvalid = "invalid"
)

// Undeliverable is an outbox row the relay gave up on because retrying
// cannot help: the version is not published, the row stays pending in the
// store, and the relay does not try it again (it only looks again when a
// claim returns it after its lease and the server's max_payload has grown
// since). When the relay publishes a newer version of the same service, the
// row is marked done as superseded.
type Undeliverable struct {
	OutboxID int64  `json:"outbox_id"`
	Service  string `json:"service"`
	Version  int64  `json:"version"`
	Reason   string `json:"reason"`
	// Size is the value's size in bytes and Limit the most the server
	// accepts (ReasonTooLarge; 0 otherwise).
	Size  int       `json:"size"`
	Limit int       `json:"limit,omitempty"`
	Error string    `json:"error"`
	At    time.Time `json:"at"`
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
	r := &Relay{o: o, dead: map[int64]Undeliverable{}, m: relayMetrics{
		rows: f.NewCounterVec(prometheus.CounterOpts{Name: "governor_distribution_relay_rows_total",
			Help: "Outbox rows relayed, by outcome: published, duplicate, superseded, canary, undeliverable (given up: too large for the server or invalid; counted once per row)."}, []string{"outcome"}),
		failures: f.NewCounterVec(prometheus.CounterOpts{Name: "governor_distribution_relay_failures_total",
			Help: "Relay failures by stage: claim, publish, mark. The row is retried after its lease."}, []string{"stage"}),
		passes: f.NewCounter(prometheus.CounterOpts{Name: "governor_distribution_relay_passes_total",
			Help: "Claim passes over the outbox."}),
		lastBatch: f.NewGauge(prometheus.GaugeOpts{Name: "governor_distribution_relay_last_batch_rows",
			Help: "Rows claimed by the last pass."}),
		undeliverable: f.NewGauge(prometheus.GaugeOpts{Name: "governor_distribution_relay_undeliverable_rows",
			Help: "Outbox rows this relay gave up on (too large for the server or invalid) and that no newer version has superseded yet."}),
	}}
	for _, s := range []Outcome{Published, Duplicate, Superseded, Staged, outcomeUndeliverable} {
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

// outcomeUndeliverable labels the rows given up on in the rows metric.
const outcomeUndeliverable Outcome = "undeliverable"

// Undeliverable lists the rows this relay gave up on and that no newer
// version has superseded yet, oldest row first.
func (r *Relay) Undeliverable() []Undeliverable {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Undeliverable, 0, len(r.dead))
	for _, u := range r.dead {
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b Undeliverable) int { return cmp.Compare(a.OutboxID, b.OutboxID) })
	return out
}

// Pass retries the rows whose publication failed earlier, then claims one
// batch and relays it; it returns how many rows it claimed. Rows that fail
// stay leased and are kept for the next pass; if this relay dies, another
// claims them when the lease expires. Rows given up on (Undeliverable) are
// not relayed again.
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
		if !slices.ContainsFunc(items, func(o versioning.OutboxItem) bool { return o.ID == it.ID }) && !r.givenUp(it) {
			items = append(items, it)
		}
	}
	var failed []versioning.OutboxItem
	for _, it := range items {
		if err := r.relay(ctx, it); err != nil {
			errs = append(errs, err)
			if !r.undeliverable(ctx, it, err) {
				failed = append(failed, it)
			}
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
		err = fmt.Errorf("the row says %s v%d but its payload is %s v%d", it.Service, it.Version, env.Service, env.Version)
	}
	if err != nil {
		return fmt.Errorf("%w: %w: outbox row %d: %w", ErrInvalid, errBadRow, it.ID, err)
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
		if !errors.Is(err, ErrTooLarge) {
			r.m.failures.WithLabelValues("publish").Inc()
		}
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
	if outcome == Published || outcome == Duplicate {
		r.supersede(ctx, env.Service, env.Version)
	}
	return nil
}

// givenUp reports whether the relay gave up on the row and should skip it.
// A row refused as too large is looked at again once the server accepts
// more than it did then (a reconnect to a server with a larger max_payload).
func (r *Relay) givenUp(it versioning.OutboxItem) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	u, ok := r.dead[it.ID]
	if !ok {
		return false
	}
	if u.Reason == ReasonTooLarge {
		if limit := r.o.Publisher.MaxValueBytes(); limit > u.Limit {
			delete(r.dead, it.ID)
			r.m.undeliverable.Set(float64(len(r.dead)))
			return false
		}
	}
	return true
}

// undeliverable records the row as given up on when err says retrying
// cannot help, and reports whether it did.
func (r *Relay) undeliverable(ctx context.Context, it versioning.OutboxItem, err error) bool {
	u := Undeliverable{OutboxID: it.ID, Service: it.Service, Version: it.Version, Size: len(it.Payload),
		Error: err.Error(), At: r.o.Clock.Now()}
	var tl *TooLargeError
	switch {
	case errors.As(err, &tl):
		u.Reason, u.Size, u.Limit = ReasonTooLarge, tl.Size, tl.Limit
	case errors.Is(err, errBadRow):
		u.Reason = ReasonInvalid
	default:
		return false
	}
	r.mu.Lock()
	_, known := r.dead[it.ID]
	r.dead[it.ID] = u
	r.m.undeliverable.Set(float64(len(r.dead)))
	r.mu.Unlock()
	if known {
		return true
	}
	r.m.rows.WithLabelValues(string(outcomeUndeliverable)).Inc()
	r.o.Logger.LogAttrs(ctx, slog.LevelError, "rule version undeliverable: not published, not retried",
		slog.String("service", u.Service), slog.Int64("version", u.Version), slog.Int64("outbox_id", u.OutboxID),
		slog.String("reason", u.Reason), slog.Int("size", u.Size), slog.Int("limit", u.Limit), slog.String("err", u.Error))
	if r.o.OnUndeliverable != nil {
		r.o.OnUndeliverable(ctx, u)
	}
	return true
}

// supersede marks done the rows given up on for older versions of the
// service, now that the bucket holds version.
func (r *Relay) supersede(ctx context.Context, service string, version int64) {
	r.mu.Lock()
	var old []Undeliverable
	for _, u := range r.dead {
		if u.Service == service && u.Version < version {
			old = append(old, u)
		}
	}
	r.mu.Unlock()
	for _, u := range old {
		if err := r.o.Outbox.MarkOutboxDone(ctx, u.OutboxID); err != nil {
			r.m.failures.WithLabelValues("mark").Inc()
			r.o.Logger.LogAttrs(ctx, slog.LevelWarn, "undeliverable row not marked done", slog.Int64("outbox_id", u.OutboxID), slog.Any("err", err))
			continue
		}
		r.mu.Lock()
		delete(r.dead, u.OutboxID)
		r.m.undeliverable.Set(float64(len(r.dead)))
		r.mu.Unlock()
		r.m.rows.WithLabelValues(string(Superseded)).Inc()
		r.o.Logger.LogAttrs(ctx, slog.LevelInfo, "undeliverable rule version superseded",
			slog.String("service", u.Service), slog.Int64("version", u.Version), slog.Int64("outbox_id", u.OutboxID),
			slog.Int64("by_version", version))
	}
}
