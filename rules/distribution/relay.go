package distribution

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/sdk/watch"
)

// RelayOptions configure a Relay. Outbox and Publisher are required.
type RelayOptions struct {
	// Outbox is the store's outbox. When it is a rules store (it has
	// versioning.Reader's Get), a row the bucket supersedes with a version
	// the store does not have is given up on as a conflict (see
	// ReasonConflict) rather than marked done. When it also implements
	// versioning.Numbering, the relay raises the store's numbering to the
	// bucket's versions at its first pass and on every conflict (Pass).
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
	// fits. If it fails, the row is not marked done and is retried like a
	// failed publication (the version is then a duplicate, and OnPublished
	// is called again).
	OnPublished func(ctx context.Context, env *rules.Envelope, canary *watch.Selector) error
	// OnUndeliverable is called once when the relay gives up on a row (see
	// Undeliverable): by the relay whose record reached the store first.
	OnUndeliverable func(ctx context.Context, u Undeliverable)
	// Name identifies this relay in the store's record of the rows it gives
	// up on (at most versioning.MaxFailureRelayBytes); default
	// "<hostname>/<pid>".
	Name       string
	Clock      clock.Clock
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// DefaultRelayOptions returns the defaults of the optional fields.
func DefaultRelayOptions() RelayOptions {
	return RelayOptions{Batch: 100, Lease: 30 * time.Second, Sweep: 5 * time.Second, RetryWait: 250 * time.Millisecond,
		Clock: clock.Real{}, Logger: slog.New(slog.DiscardHandler)}
}

// errBadRow marks a row whose payload is not a valid envelope of the row's
// service and version: retrying cannot help.
var errBadRow = errors.New("payload is not the row's envelope")

// errRowGone marks a row the store no longer has (the database was reset
// or restored from a backup taken before the row was written): there is
// nothing left to mark done or to retry.
var errRowGone = errors.New("the row is no longer in the store")

// Relay moves outbox rows to NATS.
type Relay struct {
	o RelayOptions
	m relayMetrics

	mu    sync.Mutex
	retry []heldRow // rows whose publication failed, still leased
	// checked is the server limit (MaxValueBytes) the undeliverable rows
	// were last compared with (requeueFitting).
	checked int
	// numbered is true once the store's numbering was raised to the
	// bucket's versions (raiseNumbering at the first pass).
	numbered bool
}

// heldRow is a claimed row whose publication failed, retried by the relay
// until its lease ends (until, on the relay's clock, no later than the
// store's end of the lease).
type heldRow struct {
	item  versioning.OutboxItem
	until time.Time
}

type relayMetrics struct {
	rows          *prometheus.CounterVec // outcome
	failures      *prometheus.CounterVec // stage
	passes        prometheus.Counter
	lastBatch     prometheus.Gauge
	undeliverable prometheus.Gauge
	renumbered    prometheus.Counter
}

// Reasons a row is undeliverable.
const (
	// ReasonTooLarge: the value is larger than the server's max_payload
	// allows (Size and Limit say by how much).
	ReasonTooLarge = "too_large"
	// ReasonInvalid: the row's payload is not a valid envelope of the row's
	// service and version.
	ReasonInvalid = "invalid"
	// ReasonConflict: the bucket and the store disagree (ErrConflict): the
	// bucket holds the row's version with other content, or a newer version
	// the store does not have (when the Outbox can tell: a rules store).
	// The rules database was reset or restored from a backup and numbers
	// its versions anew, or another installation writes to the same
	// bucket. Instances never apply other content under a version number
	// they run, nor go back to a lower one, so the row is not published;
	// a newer version supersedes the record.
	ReasonConflict = "conflict"
)

// Undeliverable is an outbox row a relay gave up on because retrying
// cannot help: the version is not published, and the store records the row
// as undeliverable (versioning.Outbox.MarkOutboxUndeliverable) in the
// transaction that takes it out of the claims, so no relay, this one after
// a restart included, claims it again. It stays listed until a newer
// version of the service is published (the store then keeps it as
// superseded history).
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
	// Relay names the relay that gave up (RelayOptions.Name).
	Relay string `json:"relay"`
}

// undeliverableFrom converts the store's record.
func undeliverableFrom(f versioning.OutboxFailure) Undeliverable {
	return Undeliverable{OutboxID: f.OutboxID, Service: f.Service, Version: f.Version, Reason: f.Reason,
		Size: f.Size, Limit: f.Limit, Error: f.Error, At: f.At, Relay: f.Relay}
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
	if o.Name == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "relay"
		}
		o.Name = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	if len(o.Name) > versioning.MaxFailureRelayBytes || !utf8.ValidString(o.Name) {
		return nil, fmt.Errorf("%w: relay: Name must be valid UTF-8 of at most %d bytes", ErrInvalid, versioning.MaxFailureRelayBytes)
	}
	reg := o.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	f := promauto.With(reg)
	r := &Relay{o: o, m: relayMetrics{
		rows: f.NewCounterVec(prometheus.CounterOpts{Name: "governor_distribution_relay_rows_total",
			Help: "Outbox rows relayed, by outcome: published, duplicate, superseded, canary, undeliverable (given up: too large for the server, invalid, or in conflict with the bucket; counted once per row)."}, []string{"outcome"}),
		failures: f.NewCounterVec(prometheus.CounterOpts{Name: "governor_distribution_relay_failures_total",
			Help: "Relay failures by stage: claim, publish, ledger (OnPublished), mark, renumber (raising the rules store's numbering to the bucket's). The row is retried by the same relay with back-off, or by another relay once its lease expires."}, []string{"stage"}),
		passes: f.NewCounter(prometheus.CounterOpts{Name: "governor_distribution_relay_passes_total",
			Help: "Claim passes over the outbox."}),
		lastBatch: f.NewGauge(prometheus.GaugeOpts{Name: "governor_distribution_relay_last_batch_rows",
			Help: "Rows claimed by the last pass."}),
		undeliverable: f.NewGauge(prometheus.GaugeOpts{Name: "governor_distribution_relay_undeliverable_rows",
			Help: "Outbox rows the store records as undeliverable (too large for the server, invalid or in conflict with the bucket; given up on by any relay) that no newer version has superseded yet, as of this relay's last pass."}),
		renumbered: f.NewCounter(prometheus.CounterOpts{Name: "governor_distribution_relay_renumbered_total",
			Help: "Services whose next version number in the rules store this relay raised to the version the bucket holds (the rules database was reset or restored from a backup)."}),
	}}
	for _, s := range []Outcome{Published, Duplicate, Superseded, Staged, outcomeUndeliverable} {
		r.m.rows.WithLabelValues(string(s))
	}
	for _, s := range []string{"claim", "publish", "ledger", "mark", "renumber"} {
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

// maxListed bounds Undeliverable and each read of the rows to requeue.
const maxListed = 1000

// Undeliverable lists the rows the store records as undeliverable (given up
// on by any relay, before or after a restart) that no newer version has
// superseded yet, newest first; service, if not empty, selects one service.
func (r *Relay) Undeliverable(ctx context.Context, service string) ([]Undeliverable, error) {
	fs, err := r.o.Outbox.OutboxFailures(ctx, versioning.FailureFilter{Service: service, Limit: maxListed})
	if err != nil {
		return nil, fmt.Errorf("distribution: list undeliverable rows: %w", err)
	}
	out := make([]Undeliverable, len(fs))
	for i, f := range fs {
		out[i] = undeliverableFrom(f)
	}
	return out, nil
}

// requeueFitting puts back in the claims the rows recorded as too large
// that the server now accepts: once per relay start and whenever the
// server's limit grows (a reconnect to a server with a larger max_payload).
func (r *Relay) requeueFitting(ctx context.Context) error {
	limit := r.o.Publisher.MaxValueBytes()
	r.mu.Lock()
	checked := r.checked
	r.mu.Unlock()
	if limit == 0 || limit <= checked {
		return nil
	}
	// Only the rows that fit are read: none, usually.
	filter := versioning.FailureFilter{Reason: ReasonTooLarge, MaxSize: limit, Limit: maxListed}
	var errs []error
	for {
		fs, err := r.o.Outbox.OutboxFailures(ctx, filter)
		if err != nil {
			return fmt.Errorf("distribution: list undeliverable rows that fit: %w", err)
		}
		closed := 0
		for _, f := range fs {
			ok, err := r.o.Outbox.RequeueOutbox(ctx, f.OutboxID, r.o.Name)
			if err != nil {
				r.m.failures.WithLabelValues("mark").Inc()
				errs = append(errs, fmt.Errorf("distribution: requeue outbox row %d: %w", f.OutboxID, err))
				continue
			}
			closed++ // requeued now, or by another relay meanwhile: no longer listed
			if ok {
				r.o.Logger.LogAttrs(ctx, slog.LevelInfo, "undeliverable rule version requeued: the server accepts it now",
					slog.String("service", f.Service), slog.Int64("version", f.Version), slog.Int64("outbox_id", f.OutboxID),
					slog.Int("size", f.Size), slog.Int("limit_then", f.Limit), slog.Int("limit", limit))
			}
		}
		if len(fs) < maxListed || closed < len(fs) {
			break
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	r.mu.Lock()
	r.checked = max(r.checked, limit)
	r.mu.Unlock()
	return nil
}

// countUndeliverable sets the gauge from the store.
func (r *Relay) countUndeliverable(ctx context.Context) error {
	n, err := r.o.Outbox.CountOutboxFailures(ctx, versioning.FailureFilter{})
	if err != nil {
		return fmt.Errorf("distribution: count undeliverable rows: %w", err)
	}
	r.m.undeliverable.Set(float64(n))
	return nil
}

// Pass retries the rows whose publication failed earlier, then claims one
// batch and relays it; it returns how many rows it claimed. Rows that fail
// stay leased and are kept for the next pass until the lease ends (or
// longer, while the store cannot be reached); then the next claim hands
// them out again, to this relay or another. A row claimed again is relayed
// as the store has it now, not as it was held (the database may have been
// restored meanwhile), and a row the store no longer has is dropped. Rows
// given up on (Undeliverable) are recorded in the store, which never hands
// them out again. When NATS is unavailable, the pass stops at the first
// row that finds it so and keeps the others for the next. Each pass ends by
// reading the undeliverable count for the gauge.
//
// When the Outbox is a rules store that numbers versions
// (versioning.Numbering), the relay's first pass (again until it succeeds)
// raises the store's numbering of every service to the highest version the
// bucket holds or held, and so does a row in conflict with the bucket for
// its service: after the rules database was reset or restored from a
// backup, the next version it creates is numbered above what the fleet
// runs, and is delivered (see the package documentation).
func (r *Relay) Pass(ctx context.Context) (int, error) {
	r.m.passes.Inc()
	var errs []error
	if err := r.requeueFitting(ctx); err != nil {
		errs = append(errs, err)
	}
	r.mu.Lock()
	numbered := r.numbered
	r.mu.Unlock()
	if !numbered {
		if err := r.raiseNumbering(ctx, ""); err != nil {
			errs = append(errs, err)
		} else {
			r.mu.Lock()
			r.numbered = true
			r.mu.Unlock()
		}
	}
	now := r.o.Clock.Now()
	r.mu.Lock()
	held := r.retry
	r.retry = nil
	r.mu.Unlock()
	claimed, err := r.o.Outbox.ClaimOutbox(ctx, r.o.Batch, r.o.Lease)
	if err != nil {
		r.m.failures.WithLabelValues("claim").Inc()
		errs = append(errs, fmt.Errorf("distribution: claim outbox: %w", err))
	}
	r.m.lastBatch.Set(float64(len(claimed)))
	rows := r.resync(ctx, held, claimed, err == nil, now)
	var failed []heldRow
	var renumbered []string // services whose numbering this pass raised
	unavailable := false    // NATS: the rows left wait for the next pass
	for _, h := range rows {
		if unavailable {
			failed = append(failed, h)
			continue
		}
		err := r.relay(ctx, h.item)
		if err == nil {
			continue
		}
		// Each row would wait for the publisher's timeout: with a batch
		// of rows the pass would last minutes, and go on long after NATS
		// is back.
		unavailable = errors.Is(err, ErrUnavailable)
		if errors.Is(err, errRowGone) {
			r.dropGone(ctx, h.item, err)
			continue
		}
		errs = append(errs, err)
		if errors.Is(err, ErrConflict) && !slices.Contains(renumbered, h.item.Service) {
			// The store numbers below the bucket: its next version of the
			// service is numbered above the bucket's, and is delivered.
			renumbered = append(renumbered, h.item.Service)
			if err := r.raiseNumbering(ctx, h.item.Service); err != nil {
				errs = append(errs, err)
			}
		}
		given, markErr := r.undeliverable(ctx, h.item, err)
		switch {
		case errors.Is(markErr, versioning.ErrNotFound):
			r.dropGone(ctx, h.item, markErr)
		case markErr != nil:
			errs = append(errs, markErr)
			failed = append(failed, h) // recorded on the next pass
		case !given:
			failed = append(failed, h)
		}
	}
	r.mu.Lock()
	r.retry = append(r.retry, failed...)
	r.mu.Unlock()
	if err := r.countUndeliverable(ctx); err != nil {
		errs = append(errs, err)
	}
	return len(claimed), errors.Join(errs...)
}

// resync returns the rows to relay in this pass: the rows held that were
// not claimed again, while their lease lasts or the store cannot be asked
// (answered is false: the claim failed), then the rows claimed, as the
// store has them now. A row held whose lease ended and that the store did
// not hand out again is another relay's now, done or gone. A row held with
// other content than the store now has (the database was restored) is
// logged.
func (r *Relay) resync(ctx context.Context, held []heldRow, claimed []versioning.OutboxItem, answered bool, now time.Time) []heldRow {
	rows := make([]heldRow, 0, len(held)+len(claimed))
	for _, h := range held {
		i := slices.IndexFunc(claimed, func(it versioning.OutboxItem) bool { return it.ID == h.item.ID })
		if i >= 0 {
			if it := claimed[i]; it.Service != h.item.Service || it.Version != h.item.Version || it.Checksum != h.item.Checksum {
				r.o.Logger.LogAttrs(ctx, slog.LevelWarn,
					"outbox row changed in the store since this relay claimed it (database reset or restored?): relaying the store's row",
					slog.Int64("outbox_id", it.ID), slog.String("held", fmt.Sprintf("%s v%d %s", h.item.Service, h.item.Version, h.item.Checksum)),
					slog.String("store", fmt.Sprintf("%s v%d %s", it.Service, it.Version, it.Checksum)))
			}
			continue
		}
		if now.Before(h.until) || !answered {
			rows = append(rows, h)
		}
	}
	for _, it := range claimed {
		rows = append(rows, heldRow{item: it, until: now.Add(r.o.Lease)})
	}
	return rows
}

// dropGone forgets a row the store no longer has.
func (r *Relay) dropGone(ctx context.Context, it versioning.OutboxItem, err error) {
	r.o.Logger.LogAttrs(ctx, slog.LevelWarn, "outbox row no longer in the store (database reset or restored?): not retried",
		slog.String("service", it.Service), slog.Int64("version", it.Version), slog.Int64("outbox_id", it.ID),
		slog.Any("err", err))
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
		var stale *staleError
		if errors.As(err, &stale) {
			switch {
			case stale.stable > 0:
				// The stable key has this or a newer version: Publish says
				// which (duplicate or superseded) and writes nothing.
				sel, err = nil, nil
			case stale.running && stale.staged == it.Version:
				// Staged by a relay that died before marking the row done,
				// or whose ledger write failed: the ledger hears of the
				// selector staged now, which a person may have changed.
				outcome, err, sel = Duplicate, nil, &stale.selector
			default:
				// A newer version is staged, or this one was aborted: it
				// must not reach any instance again.
				outcome, err = Superseded, nil
			}
		}
	}
	if sel == nil && err == nil {
		var newer *rules.Envelope
		if outcome, newer, err = r.o.Publisher.publish(ctx, it.Payload); err == nil && outcome == Superseded {
			err = r.storeHas(ctx, it.Service, newer)
		}
	}
	if err != nil {
		if !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrConflict) {
			r.m.failures.WithLabelValues("publish").Inc()
		}
		return fmt.Errorf("distribution: publish %s v%d: %w", it.Service, it.Version, err)
	}
	if r.o.OnPublished != nil && outcome != Superseded {
		// The row stays claimed until the ledger knows: the retry publishes
		// a duplicate and tells it again.
		if err := r.o.OnPublished(ctx, env, sel); err != nil {
			r.m.failures.WithLabelValues("ledger").Inc()
			return fmt.Errorf("distribution: tell the ledger of %s v%d: %w", it.Service, it.Version, err)
		}
	}
	if err := r.markDone(ctx, it); errors.Is(err, versioning.ErrNotFound) {
		return fmt.Errorf("%w: mark outbox row %d done: %w", errRowGone, it.ID, err)
	} else if err != nil {
		r.m.failures.WithLabelValues("mark").Inc()
		return fmt.Errorf("distribution: mark outbox row %d done: %w", it.ID, err)
	}
	r.m.rows.WithLabelValues(string(outcome)).Inc()
	log.LogAttrs(ctx, slog.LevelInfo, "rule version relayed", slog.String("outcome", string(outcome)))
	return nil
}

// ItemMarker is implemented by an Outbox that marks a row only while it is
// the row the relay claimed: the same id with the same service, version and
// checksum. After the rules database was restored from a backup, an id the
// relay holds can name another row (ids are given again from the backup's
// sequence); marking by id alone would mark published, or undeliverable, a
// row the relay never delivered. Both methods fail with
// versioning.ErrNotFound when the store has no row of that id or a row with
// other content under it, and otherwise behave as MarkOutboxDone and
// MarkOutboxUndeliverable. MemoryOutbox implements it; the relay uses it
// whenever its Outbox does.
type ItemMarker interface {
	MarkOutboxItemDone(ctx context.Context, it versioning.OutboxItem) error
	MarkOutboxItemUndeliverable(ctx context.Context, it versioning.OutboxItem, f versioning.OutboxFailure) (versioning.OutboxFailure, bool, error)
}

// markDone marks the row it done, only while the store's row of its id
// is still it (ItemMarker, else checkRow first).
func (r *Relay) markDone(ctx context.Context, it versioning.OutboxItem) error {
	if m, ok := r.o.Outbox.(ItemMarker); ok {
		return m.MarkOutboxItemDone(ctx, it)
	}
	if err := r.checkRow(ctx, it); err != nil {
		return err
	}
	return r.o.Outbox.MarkOutboxDone(ctx, it.ID)
}

// markUndeliverable records the row it as given up on, only while the
// store's row of its id is still it (ItemMarker, else checkRow first).
func (r *Relay) markUndeliverable(ctx context.Context, it versioning.OutboxItem, f versioning.OutboxFailure) (versioning.OutboxFailure, bool, error) {
	if m, ok := r.o.Outbox.(ItemMarker); ok {
		return m.MarkOutboxItemUndeliverable(ctx, it, f)
	}
	if err := r.checkRow(ctx, it); err != nil {
		return versioning.OutboxFailure{}, false, err
	}
	return r.o.Outbox.MarkOutboxUndeliverable(ctx, it.ID, f)
}

// checkRow is the check an Outbox that is not an ItemMarker allows: when
// it is a rules store (versionGetter), the row's version must be the
// store's, with the row's checksum, else the store was restored or reset
// since the row was claimed and the row is taken as gone
// (versioning.ErrNotFound). The check and the mark are two calls: a
// restore between them is not seen.
func (r *Relay) checkRow(ctx context.Context, it versioning.OutboxItem) error {
	g, ok := r.o.Outbox.(versionGetter)
	if !ok {
		return nil
	}
	v, err := g.Get(ctx, it.Service, it.Version)
	switch {
	case errors.Is(err, versioning.ErrNotFound):
		return fmt.Errorf("%w: the rules store no longer has %s v%d of outbox row %d", versioning.ErrNotFound, it.Service, it.Version, it.ID)
	case err != nil:
		return fmt.Errorf("read %s v%d of outbox row %d: %w", it.Service, it.Version, it.ID, err)
	case v.Checksum != it.Checksum:
		return fmt.Errorf("%w: the rules store has %s v%d with checksum %s, outbox row %d was claimed with %s",
			versioning.ErrNotFound, it.Service, it.Version, v.Checksum, it.ID, it.Checksum)
	}
	return nil
}

// versionGetter is the part of a rules store (versioning.Reader) the relay
// asks, when its Outbox has it, whether a version the bucket holds is one
// of the store's.
type versionGetter interface {
	Get(ctx context.Context, service string, number int64) (versioning.Version, error)
}

// storeHas checks that the newer version that superseded a row in the
// bucket is the store's version of that number, when the Outbox can tell
// (versionGetter). If the store does not have it, or has other content
// under its number, the rules database was reset or restored from an older
// backup and numbers its versions anew: the row is not superseded but in
// conflict (ErrConflict), and is listed as undeliverable instead of being
// marked published.
func (r *Relay) storeHas(ctx context.Context, service string, newer *rules.Envelope) error {
	g, ok := r.o.Outbox.(versionGetter)
	if !ok || newer == nil {
		return nil
	}
	v, err := g.Get(ctx, service, newer.Version)
	switch {
	case errors.Is(err, versioning.ErrNotFound):
		return fmt.Errorf("%w: the bucket holds %s version %d (checksum %s), which the rules store does not have%s",
			ErrConflict, service, newer.Version, newer.Checksum, conflictHint)
	case err != nil:
		return fmt.Errorf("distribution: read %s v%d from the rules store: %w", service, newer.Version, err)
	case v.Checksum != newer.Checksum:
		return fmt.Errorf("%w: the bucket holds %s version %d with checksum %s, the rules store has it with %s%s",
			ErrConflict, service, newer.Version, newer.Checksum, v.Checksum, conflictHint)
	}
	return nil
}

// undeliverable records the row in the store as given up on when err says
// retrying cannot help, and reports whether it did; an error means the
// store could not record it (the row is kept for the next pass).
func (r *Relay) undeliverable(ctx context.Context, it versioning.OutboxItem, err error) (bool, error) {
	f := versioning.OutboxFailure{Size: len(it.Payload), Error: truncate(err.Error(), versioning.MaxFailureErrorBytes),
		Relay: r.o.Name}
	var tl *TooLargeError
	switch {
	case errors.As(err, &tl):
		f.Reason, f.Size, f.Limit = ReasonTooLarge, tl.Size, tl.Limit
	case errors.Is(err, errBadRow):
		f.Reason = ReasonInvalid
	case errors.Is(err, ErrConflict):
		f.Reason = ReasonConflict
	default:
		return false, nil
	}
	rec, recorded, markErr := r.markUndeliverable(ctx, it, f)
	if markErr != nil {
		r.m.failures.WithLabelValues("mark").Inc()
		return false, fmt.Errorf("distribution: mark outbox row %d undeliverable: %w", it.ID, markErr)
	}
	if !recorded {
		return true, nil // another relay recorded it, or published it meanwhile
	}
	u := undeliverableFrom(rec)
	r.m.rows.WithLabelValues(string(outcomeUndeliverable)).Inc()
	r.o.Logger.LogAttrs(ctx, slog.LevelError, "rule version undeliverable: not published, not retried",
		slog.String("service", u.Service), slog.Int64("version", u.Version), slog.Int64("outbox_id", u.OutboxID),
		slog.String("reason", u.Reason), slog.Int("size", u.Size), slog.Int("limit", u.Limit), slog.String("err", u.Error))
	if r.o.OnUndeliverable != nil {
		r.o.OnUndeliverable(ctx, u)
	}
	return true, nil
}

// truncate cuts s to at most n bytes of valid UTF-8.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
