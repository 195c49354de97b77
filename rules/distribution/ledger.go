package distribution

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/sdk/watch"
)

// LedgerOptions configure a Ledger. Store is required.
type LedgerOptions struct {
	Store LedgerStore
	// Names gives the subjects; the zero value uses the default prefix.
	Names watch.Names
	// Grace is how long an instance may be behind before it is STALE;
	// default 30s.
	Grace time.Duration
	// GoneAfter is how long without a heartbeat makes an instance GONE;
	// default 35s, and never less than GoneBeats heartbeat periods of the
	// instance. The ledger must have been listening for all of it: the
	// period starts again when it starts, reconnects to NATS or fails to
	// record a message.
	GoneAfter time.Duration
	// GoneBeats: missed heartbeats that make an instance GONE; default 3.
	GoneBeats int
	// ForgetAfter is how long after its last heartbeat a GONE instance is
	// forgotten: a sweep deletes its record (its transitions stay in the
	// history), so the instances of replaced pods and restarted processes,
	// which come back under new ids, do not pile up; default 24h. An
	// instance heard from again is recorded anew.
	ForgetAfter time.Duration
	// TransitionRetention is how long the history of transitions is kept:
	// sweeps delete the transitions older than it, except the newest one
	// of each instance still recorded (the one into its current state), so
	// that the history of restarted pods does not grow without bound;
	// default 30 days (DefaultTransitionRetention). The deletes go in
	// batches of at most 1000 rows, one per sweep while a backlog lasts
	// (then one every 10 minutes), so a large backlog never holds the
	// table for long.
	TransitionRetention time.Duration
	// Sweep is the period of re-evaluation (STALE and GONE need time to
	// pass); default 5s.
	Sweep time.Duration
	// QueueGroup shares the subjects between ledger replicas; default
	// "governor-ledger".
	QueueGroup string
	// Latest, when set, tells the ledger the stable version of a service:
	// it seeds the target of a service the ledger has none for (a fresh
	// ledger next to a bucket that already holds versions), and every Sweep
	// catches up with a newer version the ledger missed (it could not record
	// the publication). Publisher.Latest fits through LatestFrom.
	Latest func(ctx context.Context, service string) (int64, error)
	// Staged, when set, tells the ledger the canary the bucket stages for a
	// service (nil if none): every Sweep makes the recorded canary the
	// bucket's, should the ledger have missed a StartCanary, a selector
	// change or an abort (the bucket changed, the ledger's write failed).
	// Publisher.Canary fits.
	Staged func(ctx context.Context, service string) (*watch.Canary, error)
	// Checksum, when set, returns the checksum the rules store has for a
	// version of a service ("" if it has none); ChecksumFrom adapts a rules
	// store, and Plane sets it when its Outbox is one. The ledger compares
	// it with the checksum of the content an instance says it runs
	// (watch.Report.RunningChecksum, watch.Heartbeat.RunningChecksum): an
	// instance that runs other content under the number meant for it is
	// NACKED with reason NackOtherContent, not SYNCED. Each replica asks
	// once per service and version between two sweeps (a publication it
	// records tells it the checksum); a failed lookup is logged and the
	// message recorded without the comparison. Without it, and for
	// messages without a checksum (older SDKs), instances are compared by
	// version only.
	Checksum func(ctx context.Context, service string, version int64) (string, error)
	// Buffer bounds the messages waiting to be recorded; default 8192.
	// Beyond it messages are dropped and counted (heartbeats repair the
	// ledger).
	Buffer int
	// RecordTimeout bounds the recording of one batch of messages (their
	// store calls): Run records the messages waiting, up to 512, together,
	// with one commit on a LedgerBatchStore (see Ledger.Run); default 5s.
	// A database that stops answering without refusing (a network
	// partition) held the ledger's one loop until the TCP timeout, with
	// every other message waiting or dropped.
	RecordTimeout time.Duration
	// SweepTimeout bounds one sweep of Run (its store and bucket calls),
	// and the store calls of Published and Aborted; default 30s. On a
	// LedgerBatchStore the instances they re-evaluate are written 512 to a
	// transaction (a commit each held a slow disk past the bound at 10,000
	// instances). A database that stops answering without refusing held
	// the ledger's one loop, and every message waiting or dropped behind
	// it, until the TCP timeout. A sweep cut short keeps what it wrote; the
	// next sweep starts over.
	SweepTimeout time.Duration
	Clock        clock.Clock
	Logger       *slog.Logger
	Registerer   prometheus.Registerer
}

// DefaultLedgerOptions returns the defaults of the optional fields.
func DefaultLedgerOptions() LedgerOptions {
	return LedgerOptions{Grace: 30 * time.Second, GoneAfter: 35 * time.Second, GoneBeats: 3, ForgetAfter: 24 * time.Hour,
		TransitionRetention: DefaultTransitionRetention, Sweep: 5 * time.Second, QueueGroup: "governor-ledger",
		Buffer: 8192, RecordTimeout: 5 * time.Second, SweepTimeout: 30 * time.Second, Clock: clock.Real{}, Logger: slog.New(slog.DiscardHandler)}
}

// Ledger records what every instance runs.
type Ledger struct {
	o    LedgerOptions
	eval evaluator
	// mu serialises this replica's updates of instances and targets; other
	// replicas are kept out by the store's compare-and-set (LedgerStore).
	mu sync.Mutex

	messages  *prometheus.CounterVec // kind, result
	states    *prometheus.GaugeVec   // service, state
	moves     *prometheus.CounterVec // to
	conflicts prometheus.Counter
	pruned    prometheus.Counter
	// gauged lists the services whose state gauges the last sweep set.
	gauged map[string]bool
	// pruneBatch bounds the transitions one sweep deletes; nextPrune is
	// when a sweep deletes the next batch.
	pruneBatch int
	nextPrune  time.Time
	// saveBatch bounds the instance writes of a re-evaluation that go
	// in one transaction on a LedgerBatchStore.
	saveBatch int
	// deaf is the last time this replica could not hear or record the
	// instances' messages (see evaluator.evaluate).
	deaf time.Time
	// reconnects is the connection's count as of the last sweep of Run.
	reconnects uint64

	// sums caches LedgerOptions.Checksum between two sweeps (guarded by
	// sumsMu, not mu: messages are looked up before they are recorded).
	sumsMu sync.Mutex
	sums   map[versionKey]string
}

// versionKey names a version of a service.
type versionKey struct {
	service string
	version int64
}

// DefaultTransitionRetention is how long the ledger keeps the history of
// transitions by default (LedgerOptions.TransitionRetention).
const DefaultTransitionRetention = 30 * 24 * time.Hour

// pruneBatch bounds the transitions one sweep deletes, and pruneEvery is
// the time between deletes once no backlog is left.
const (
	pruneBatch = 1000
	pruneEvery = 10 * time.Minute
)

// maxAttempts bounds the rounds of one compare-and-set update of a ledger
// record: a round fails only when another replica changed the record since
// it was read.
const maxAttempts = 10

// NewLedger checks the options and returns a ledger.
func NewLedger(o LedgerOptions) (*Ledger, error) {
	d := DefaultLedgerOptions()
	if o.Store == nil {
		return nil, fmt.Errorf("%w: ledger: Store is required", ErrInvalid)
	}
	for _, f := range []struct {
		name  string
		value int64
	}{{"Grace", int64(o.Grace)}, {"GoneAfter", int64(o.GoneAfter)}, {"GoneBeats", int64(o.GoneBeats)},
		{"ForgetAfter", int64(o.ForgetAfter)}, {"TransitionRetention", int64(o.TransitionRetention)},
		{"Sweep", int64(o.Sweep)}, {"Buffer", int64(o.Buffer)}, {"RecordTimeout", int64(o.RecordTimeout)},
		{"SweepTimeout", int64(o.SweepTimeout)}} {
		if f.value < 0 {
			return nil, fmt.Errorf("%w: ledger: %s must not be negative, got %d", ErrInvalid, f.name, f.value)
		}
	}
	if o.Grace == 0 {
		o.Grace = d.Grace
	}
	if o.GoneAfter == 0 {
		o.GoneAfter = d.GoneAfter
	}
	if o.GoneBeats == 0 {
		o.GoneBeats = d.GoneBeats
	}
	if o.ForgetAfter == 0 {
		o.ForgetAfter = d.ForgetAfter
	}
	if o.TransitionRetention == 0 {
		o.TransitionRetention = d.TransitionRetention
	}
	if o.Sweep == 0 {
		o.Sweep = d.Sweep
	}
	if o.QueueGroup == "" {
		o.QueueGroup = d.QueueGroup
	}
	if o.Buffer == 0 {
		o.Buffer = d.Buffer
	}
	if o.RecordTimeout == 0 {
		o.RecordTimeout = d.RecordTimeout
	}
	if o.SweepTimeout == 0 {
		o.SweepTimeout = d.SweepTimeout
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
	l := &Ledger{o: o, eval: evaluator{grace: o.Grace, goneAfter: o.GoneAfter, goneBeats: o.GoneBeats},
		messages: f.NewCounterVec(prometheus.CounterOpts{Name: "governor_distribution_ledger_messages_total",
			Help: "Messages from SDK instances by kind (ack, nack, heartbeat) and result (recorded, malformed, dropped, failed)."},
			[]string{"kind", "result"}),
		states: f.NewGaugeVec(prometheus.GaugeOpts{Name: "governor_distribution_ledger_instances",
			Help: "Instances per service and delivery state, as of the last sweep."}, []string{"service", "state"}),
		moves: f.NewCounterVec(prometheus.CounterOpts{Name: "governor_distribution_ledger_transitions_total",
			Help: "State transitions of instances, by the state entered."}, []string{"to"}),
		conflicts: f.NewCounter(prometheus.CounterOpts{Name: "governor_distribution_ledger_conflicts_total",
			Help: "Ledger records another replica changed between this one's read and write, read and written again."}),
		pruned: f.NewCounter(prometheus.CounterOpts{Name: "governor_distribution_ledger_transitions_pruned_total",
			Help: "Transitions deleted from the history because they were older than the retention."}),
		pruneBatch: pruneBatch,
		saveBatch:  maxBatch,
		sums:       map[versionKey]string{},
	}
	for _, s := range States {
		l.moves.WithLabelValues(string(s))
	}
	for _, k := range []string{"ack", "nack", "heartbeat"} {
		for _, r := range []string{"recorded", "malformed", "dropped", "failed"} {
			l.messages.WithLabelValues(k, r)
		}
	}
	return l, nil
}

// Published records that env is the version meant for a service: for every
// instance, or (canary not nil) for the instances the selector picks. It has
// the signature of RelayOptions.OnPublished. Its store calls are bounded by
// SweepTimeout: the relay calls it under a context without a deadline, and
// a database that stopped answering held the relay and, through the
// ledger's lock, its message loop until the TCP timeout; the relay retries
// a row whose ledger call failed.
func (l *Ledger) Published(ctx context.Context, env *rules.Envelope, canary *watch.Selector) error {
	if l.o.Checksum != nil {
		l.sumsMu.Lock()
		l.sums[versionKey{env.Service, env.Version}] = env.Checksum
		l.sumsMu.Unlock()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, l.o.SweepTimeout)
	defer cancel()
	now := l.o.Clock.Now()
	t, _, err := l.updateTarget(ctx, env.Service, func(t *Target, _ bool) bool {
		if canary == nil {
			advanceStable(t, env.Version, now)
			return true
		}
		return stageCanary(t, env.Version, *canary, now)
	})
	if err != nil {
		return err
	}
	return l.reevaluate(ctx, t)
}

// advanceStable makes v the stable version of t if it is newer; a canary
// that is not newer than it is over.
func advanceStable(t *Target, v int64, now time.Time) {
	if v <= t.Stable {
		return
	}
	t.Stable, t.StableAt = v, now
	if t.Canary <= t.Stable {
		t.Canary, t.CanaryAt, t.Selector = 0, time.Time{}, nil
	}
}

// stageCanary makes v, staged to the instances sel picks, the canary of t
// and reports whether t changed. Canary versions only go forward
// (Publisher.StartCanary), so a canary older than the recorded one, or not
// newer than the stable version, is a late report and changes nothing. The
// recorded canary told again keeps its time, so a duplicate does not
// restart the grace period; with another selector (SetCanarySelector) the
// time moves, as the newly selected instances were sent it now.
func stageCanary(t *Target, v int64, sel watch.Selector, now time.Time) bool {
	if v <= t.Stable || v < t.Canary || (v == t.Canary && sameSelector(&sel, t.Selector)) {
		return false
	}
	sel.Labels = maps.Clone(sel.Labels)
	t.Canary, t.CanaryAt, t.Selector = v, now, &sel
	return true
}

// Aborted records that a service's staged version was withdrawn: the
// recorded canary, whichever version it is. Its store calls are bounded by
// SweepTimeout, as Published's.
func (l *Ledger) Aborted(ctx context.Context, service string) error {
	return l.aborted(ctx, service, 0)
}

// aborted withdraws the recorded canary if it is not newer than version (0:
// any). A newer one was staged after the bucket's abort, and stays.
func (l *Ledger) aborted(ctx context.Context, service string, version int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, l.o.SweepTimeout)
	defer cancel()
	t, wrote, err := l.updateTarget(ctx, service, func(t *Target, ok bool) bool {
		if !ok || (version != 0 && t.Canary > version) {
			return false
		}
		t.Canary, t.CanaryAt, t.Selector = 0, time.Time{}, nil
		return true
	})
	if err != nil || !wrote {
		return err
	}
	return l.reevaluate(ctx, t)
}

// updateTarget reads a service's target (ok false: none recorded), lets
// change modify it, and writes it unless change returns false. The write is
// a compare-and-set: if another replica changed the target since it was
// read, it is read and changed again. It returns the target as written (or
// as read, when change wrote nothing) and whether it wrote.
func (l *Ledger) updateTarget(ctx context.Context, service string, change func(t *Target, ok bool) bool) (t Target, wrote bool, err error) {
	err = l.compareAndSet(func() error {
		var ok bool
		if t, ok, err = l.o.Store.Target(ctx, service); err != nil {
			return err
		}
		var prev *Target
		if ok {
			p := t
			prev = &p
		}
		t.Service = service
		if wrote = change(&t, ok); !wrote {
			return nil
		}
		return l.o.Store.SetTarget(ctx, prev, t)
	})
	if err != nil {
		return t, false, fmt.Errorf("distribution: ledger target: %w", err)
	}
	return t, wrote, nil
}

// compareAndSet runs op, one read and compare-and-set write of the store,
// again while another replica's write beats it (ErrChanged), at most
// maxAttempts times, counting each conflict.
func (l *Ledger) compareAndSet(op func() error) error {
	return l.compareAndSetFrom(1, op)
}

// compareAndSetFrom is compareAndSet from attempt first on: the attempts
// before it were refused elsewhere (a batch's save, LedgerBatchStore).
func (l *Ledger) compareAndSetFrom(first int, op func() error) error {
	for attempt := first; ; attempt++ {
		err := op()
		if !errors.Is(err, ErrChanged) || attempt == maxAttempts {
			return err
		}
		l.conflicts.Inc()
	}
}

// HandleReport records an ACK or NACK. A report older than the newest
// message recorded of the instance (see Instance.MessageAt) only refreshes
// LastSeen and AckVersion.
func (l *Ledger) HandleReport(ctx context.Context, r *watch.Report) error {
	c := reportContent(r)
	l.lookUp(ctx, r.Service, c)
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.updateInstance(ctx, r.Service, r.Instance, l.reportChange(r, c))
}

// reportChange is the change a report makes to its instance's record; c
// is what it says of the content running (reportContent, looked up).
func (l *Ledger) reportChange(r *watch.Report, c *contentCheck) func(in *Instance, now time.Time) {
	return func(in *Instance, now time.Time) {
		in.LastSeen = now
		if r.Status == watch.StatusACK {
			in.AckVersion = max(in.AckVersion, r.Version)
		}
		if !l.inOrder(in, r.At) {
			return
		}
		was := nackOf(in)
		in.Running = r.Running
		if r.Labels != nil {
			in.Labels = maps.Clone(r.Labels)
		}
		if r.Status == watch.StatusNACK {
			in.NackVersion, in.NackReason, in.NackError, in.NackAt = r.Version, string(r.Reason), r.Error, now
		}
		c.record(in, was, now)
	}
}

// HandleHeartbeat records a heartbeat. A heartbeat older than the newest
// message recorded of the instance (see Instance.MessageAt) only refreshes
// LastSeen and HeartbeatMS.
func (l *Ledger) HandleHeartbeat(ctx context.Context, h *watch.Heartbeat) error {
	c := heartbeatContent(h)
	l.lookUp(ctx, h.Service, c)
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.updateInstance(ctx, h.Service, h.Instance, l.heartbeatChange(h, c))
}

// heartbeatChange is the change a heartbeat makes to its instance's
// record; c is what it says of the content running (heartbeatContent,
// looked up).
func (l *Ledger) heartbeatChange(h *watch.Heartbeat, c *contentCheck) func(in *Instance, now time.Time) {
	return func(in *Instance, now time.Time) {
		in.LastSeen, in.HeartbeatMS = now, h.IntervalMS
		if !l.inOrder(in, h.At) {
			return
		}
		was := nackOf(in)
		defer c.record(in, was, now)
		in.Running = h.Running
		in.Labels = maps.Clone(h.Labels)
		if h.NackError != "" && (h.NackVersion != in.NackVersion || h.NackError != in.NackError) {
			// A NACK this ledger missed (it was down or disconnected).
			in.NackVersion, in.NackReason, in.NackError, in.NackAt = h.NackVersion, string(h.NackReason), h.NackError, now
		}
	}
}

// inOrder reports whether a message the instance sent at (its own clock)
// may record what the instance runs, and if so makes at the instance's
// MessageAt. Reports and heartbeats arrive on two subscriptions, each with
// its own delivery goroutine, and are shared out between ledger replicas,
// so a heartbeat sent before an ACK can be handled after it: recording its
// Running would move the instance back to the version it ran before, with
// false transitions until the next heartbeat. A message is out of order
// when it was sent before the newest one recorded, by at most GoneAfter;
// one older by more is taken for the instance's clock stepping back (or a
// new process under the same id), and recorded. A message or record
// without a time (older SDKs, records from before migration 00201) is in
// order.
func (l *Ledger) inOrder(in *Instance, at time.Time) bool {
	if at.IsZero() {
		return true
	}
	if !in.MessageAt.IsZero() && at.Before(in.MessageAt) && in.MessageAt.Sub(at) <= l.o.GoneAfter {
		return false
	}
	in.MessageAt = at
	return true
}

// updateInstance reads an instance (a new record if unknown), lets change
// record a message in it, evaluates it against the service's target and
// writes it with a transition if its state changed. The write is a
// compare-and-set: if another replica changed the record since it was read
// (recorded another message of the instance), it is read and changed again,
// so neither message is lost. A message it cannot record makes the ledger
// deaf (see evaluator.evaluate) as of now.
func (l *Ledger) updateInstance(ctx context.Context, service, instance string, change func(in *Instance, now time.Time)) error {
	err := l.compareAndSet(func() error {
		now := l.o.Clock.Now()
		in, ok, err := l.o.Store.Instance(ctx, service, instance)
		if err != nil {
			return fmt.Errorf("distribution: ledger instance: %w", err)
		}
		var prev *Instance
		if ok {
			p := in
			p.Labels = maps.Clone(in.Labels)
			prev = &p
		} else {
			in = Instance{Service: service, Instance: instance, Since: now}
		}
		change(&in, now)
		t, err := l.target(ctx, service)
		if err != nil {
			return err
		}
		_, err = l.saveAgainst(ctx, prev, in, t, now, true)
		return err
	})
	if err != nil {
		// A message lost: the instance may seem silent for a while.
		l.deaf = l.o.Clock.Now()
	}
	return err
}

// target returns the service's target, seeding it from Latest when the
// ledger has none.
func (l *Ledger) target(ctx context.Context, service string) (t Target, err error) {
	err = l.compareAndSet(func() error { // another replica may record one meanwhile: then read it
		var ok bool
		if t, ok, err = l.o.Store.Target(ctx, service); err != nil {
			return fmt.Errorf("distribution: ledger target: %w", err)
		}
		t.Service = service
		if ok || l.o.Latest == nil {
			return nil
		}
		v, err := l.o.Latest(ctx, service)
		if err != nil {
			return fmt.Errorf("distribution: ledger target of %s: %w", service, err)
		}
		if v <= 0 {
			return nil
		}
		t.Stable, t.StableAt = v, l.o.Clock.Now()
		if err := l.o.Store.SetTarget(ctx, nil, t); err != nil {
			return fmt.Errorf("distribution: ledger target: %w", err)
		}
		return nil
	})
	return t, err
}

// catchUp moves t's stable version up to the one latest reports, and
// records it. On error it returns t unchanged.
func (l *Ledger) catchUp(ctx context.Context, t Target, latest func(context.Context, string) (int64, error)) (Target, error) {
	v, err := latest(ctx, t.Service)
	if err != nil {
		return t, fmt.Errorf("distribution: ledger target of %s: %w", t.Service, err)
	}
	if v <= t.Stable {
		return t, nil
	}
	now := l.o.Clock.Now()
	var recorded int64
	moved, wrote, err := l.updateTarget(ctx, t.Service, func(cur *Target, _ bool) bool {
		if v <= cur.Stable {
			return false // another replica moved it meanwhile
		}
		recorded = cur.Stable
		advanceStable(cur, v, now)
		return true
	})
	if err != nil {
		return t, err
	}
	if wrote {
		l.o.Logger.LogAttrs(ctx, slog.LevelInfo, "ledger: caught up with a publication it missed",
			slog.String("service", t.Service), slog.Int64("recorded", recorded), slog.Int64("version", v))
	}
	return moved, nil
}

// catchUpCanary makes t's canary the one staged reports for the bucket
// (none, if it stages none or one the stable version overtook), and records
// it. t was read before the bucket, and the ledger is told of a canary
// after the bucket has it: a canary t records that the bucket no longer
// stages was withdrawn, and a staged one t lacks was staged. The write
// happens only while the recorded canary is still t's (a replica recording
// another meanwhile knows better). On error it returns t unchanged.
func (l *Ledger) catchUpCanary(ctx context.Context, t Target, staged func(context.Context, string) (*watch.Canary, error)) (Target, error) {
	c, err := staged(ctx, t.Service)
	if err != nil {
		return t, fmt.Errorf("distribution: ledger canary of %s: %w", t.Service, err)
	}
	var v int64
	var sel *watch.Selector
	if c != nil && c.Envelope != nil && c.Envelope.Version > t.Stable {
		v = c.Envelope.Version
		s := c.Selector
		s.Labels = maps.Clone(s.Labels)
		sel = &s
	}
	if v == t.Canary && (v == 0 || sameSelector(sel, t.Selector)) {
		return t, nil
	}
	now := l.o.Clock.Now()
	moved, wrote, err := l.updateTarget(ctx, t.Service, func(cur *Target, _ bool) bool {
		if cur.Stable != t.Stable || cur.Canary != t.Canary || !sameSelector(cur.Selector, t.Selector) {
			return false
		}
		if v == 0 {
			cur.Canary, cur.CanaryAt, cur.Selector = 0, time.Time{}, nil
		} else {
			if cur.Canary != v {
				cur.Canary, cur.CanaryAt = v, now
			}
			cur.Selector = sel
		}
		return true
	})
	if err != nil {
		return t, err
	}
	if wrote {
		l.o.Logger.LogAttrs(ctx, slog.LevelInfo, "ledger: caught up with a canary change it missed",
			slog.String("service", t.Service), slog.Int64("recorded", t.Canary), slog.Int64("canary", v))
	}
	return moved, nil
}

// LatestFrom adapts a Publisher for LedgerOptions.Latest.
func LatestFrom(p *Publisher) func(ctx context.Context, service string) (int64, error) {
	return func(ctx context.Context, service string) (int64, error) {
		env, err := p.Latest(ctx, service)
		if err != nil || env == nil {
			return 0, err
		}
		return env.Version, nil
	}
}

// move sets in's state and target to what evaluate found at now, and
// returns the transition when the state changed (nil otherwise).
func move(in *Instance, state State, want int64, detail string, now time.Time) *Transition {
	var tr *Transition
	if state != in.State {
		tr = &Transition{Service: in.Service, Instance: in.Instance, From: in.State, To: state,
			Target: want, Running: in.Running, Detail: detail, At: now}
		in.State, in.Since = state, now
	}
	in.Target = want
	return tr
}

// saveAgainst evaluates the instance against t and writes it over prev,
// the record as read (nil: a new instance), with compare-and-set; unless
// changed is set (the record itself changed) it writes only when the state
// or the target moved. It returns the state.
func (l *Ledger) saveAgainst(ctx context.Context, prev *Instance, in Instance, t Target, now time.Time, changed bool) (State, error) {
	state, want, detail := l.eval.evaluate(&in, t, now, l.deaf)
	if !changed && state == in.State && want == in.Target {
		return state, nil
	}
	tr := move(&in, state, want, detail, now)
	if err := l.o.Store.SaveInstance(ctx, prev, in, tr); err != nil {
		return state, fmt.Errorf("distribution: ledger save %s/%s: %w", in.Service, in.Instance, err)
	}
	if tr != nil {
		l.moves.WithLabelValues(string(state)).Inc()
	}
	return state, nil
}

// Sweep re-evaluates every instance (time makes instances STALE or GONE),
// forgets the instances GONE for longer than LedgerOptions.ForgetAfter,
// refreshes the per-state gauges and deletes a batch of the transitions
// older than LedgerOptions.TransitionRetention. With LedgerOptions.Latest,
// it first moves each service's stable version up to the bucket's, should
// the ledger have missed a publication, and with LedgerOptions.Staged it
// records the canary the bucket stages; if the bucket cannot be read, the
// sweep goes on with the recorded targets.
func (l *Ledger) Sweep(ctx context.Context) error {
	l.sumsMu.Lock()
	clear(l.sums) // a restored rules store has other content under its numbers
	l.sumsMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	ins, err := l.o.Store.Instances(ctx, "")
	if err != nil {
		return fmt.Errorf("distribution: ledger instances: %w", err)
	}
	now := l.o.Clock.Now()
	targets := map[string]Target{}
	latest, staged := l.o.Latest, l.o.Staged
	r := l.newReevaluation(now, len(ins))
	services := make([]string, 0, len(ins)) // of r's instances, in order
	for _, in := range ins {
		t, ok := targets[in.Service]
		if !ok {
			if t, err = l.target(ctx, in.Service); err != nil {
				// The batch waiting is written: one at a time had written it.
				return errors.Join(err, r.flush(ctx))
			}
			if latest != nil {
				if t, err = l.catchUp(ctx, t, latest); err != nil {
					// The bucket or the store cannot be reached: keep the
					// recorded targets, and wait for one timeout per sweep at
					// most.
					l.o.Logger.LogAttrs(ctx, slog.LevelWarn, "ledger: stable versions not compared with the bucket", slog.Any("err", err))
					latest = nil
				}
			}
			if staged != nil {
				if t, err = l.catchUpCanary(ctx, t, staged); err != nil {
					l.o.Logger.LogAttrs(ctx, slog.LevelWarn, "ledger: canaries not compared with the bucket", slog.Any("err", err))
					staged = nil
				}
			}
			targets[in.Service] = t
		}
		forgot, err := l.forget(ctx, in, t, now)
		if err != nil {
			return errors.Join(err, r.flush(ctx))
		}
		if forgot {
			continue
		}
		if err := r.add(ctx, in, t); err != nil {
			return err
		}
		services = append(services, in.Service)
	}
	if err := r.flush(ctx); err != nil {
		return err
	}
	counts := map[string]map[State]int{}
	for i, state := range r.states {
		svc := services[i]
		if counts[svc] == nil {
			counts[svc] = map[State]int{}
		}
		counts[svc][state]++
	}
	for svc := range l.gauged {
		if counts[svc] == nil {
			for _, s := range States {
				l.states.DeleteLabelValues(svc, string(s))
			}
		}
	}
	l.gauged = map[string]bool{}
	for svc, c := range counts {
		for _, s := range States {
			l.states.WithLabelValues(svc, string(s)).Set(float64(c[s]))
		}
		l.gauged[svc] = true
	}
	return l.prune(ctx, now)
}

// prune deletes one batch of the transitions older than the retention
// (the store keeps each known instance's newest). While batches come back
// full, a backlog is left and the next sweep deletes the next batch;
// otherwise the next delete waits pruneEvery. A failed delete is tried
// again at the next sweep.
func (l *Ledger) prune(ctx context.Context, now time.Time) error {
	if now.Before(l.nextPrune) {
		return nil
	}
	n, err := l.o.Store.PruneTransitions(ctx, now.Add(-l.o.TransitionRetention), l.pruneBatch)
	if err != nil {
		return fmt.Errorf("distribution: ledger prune: %w", err)
	}
	l.pruned.Add(float64(n))
	if n < l.pruneBatch {
		l.nextPrune = now.Add(pruneEvery)
	}
	return nil
}

// forget deletes the record of an instance GONE for longer than
// ForgetAfter, as read, and reports whether it did; a record another
// replica changed meanwhile (the instance spoke again) stays.
func (l *Ledger) forget(ctx context.Context, in Instance, t Target, now time.Time) (bool, error) {
	if in.State != StateGone || now.Sub(in.LastSeen) <= l.o.ForgetAfter {
		return false, nil
	}
	if state, _, _ := l.eval.evaluate(&in, t, now, l.deaf); state != StateGone {
		return false, nil
	}
	err := l.o.Store.DeleteInstance(ctx, in)
	if errors.Is(err, ErrChanged) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("distribution: ledger forget %s/%s: %w", in.Service, in.Instance, err)
	}
	l.o.Logger.LogAttrs(ctx, slog.LevelInfo, "ledger: forgot an instance gone for long",
		slog.String("service", in.Service), slog.String("instance", in.Instance), slog.Time("last_seen", in.LastSeen))
	return true, nil
}

// Instances lists the instances of a service ("" for all) with their states.
func (l *Ledger) Instances(ctx context.Context, service string) ([]Instance, error) {
	return l.o.Store.Instances(ctx, service)
}

// History returns the newest transitions of a service (and instance, if not
// ""), newest first.
func (l *Ledger) History(ctx context.Context, service, instance string, limit int) ([]Transition, error) {
	return l.o.Store.Transitions(ctx, service, instance, limit)
}

// Summary counts a service's instances per state.
func (l *Ledger) Summary(ctx context.Context, service string) (map[State]int, error) {
	ins, err := l.o.Store.Instances(ctx, service)
	if err != nil {
		return nil, err
	}
	out := map[State]int{}
	for _, in := range ins {
		out[in.State]++
	}
	return out, nil
}

// Run subscribes to the reports and heartbeats of every service and records
// them until ctx ends, sweeping every Sweep. It returns nil when ctx ends.
// It records every message already waiting (up to 512) together: on a
// LedgerBatchStore in one transaction, one commit, which is what lets one
// loop keep up with a large fleet (on PostgreSQL a commit per message
// held it to a few hundred to a thousand messages per second, a fleet of
// 10,000 instances at the default 10s heartbeat sends 1,000). What it
// records is what recording each message alone records (see recordBatch).
//
// When ctx ends, Run finishes the batch it is recording and drains: the
// server sends this replica no more messages (the queue group's other
// replicas take them), and the messages it had already taken (its buffer,
// and those the server sent before it stopped) are recorded, within one
// more RecordTimeout. So a replica stopped in a rolling restart loses
// none of the ACKs and NACKs it took; what a store too slow to answer
// leaves unrecorded is counted as dropped and logged. Messages sent while
// no replica listens are not kept (core NATS): heartbeats, which repeat
// what an instance runs and its last NACK, repair the records.
func (l *Ledger) Run(ctx context.Context, nc *nats.Conn) error {
	ch := make(chan *nats.Msg, l.o.Buffer)
	var dropped atomic.Int64 // since the last sweep, for the warning
	// handing is read-held by a subscription's callback while it hands a
	// message over, so that shutdown knows when none is left in between.
	var handing sync.RWMutex
	var subs []*nats.Subscription
	defer func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	}()
	for _, subj := range []string{l.o.Names.ReportWildcard(), l.o.Names.HeartbeatWildcard()} {
		s, err := nc.QueueSubscribe(subj, l.o.QueueGroup, func(m *nats.Msg) {
			handing.RLock()
			defer handing.RUnlock()
			select {
			case ch <- m:
			default:
				l.messages.WithLabelValues(kindOf(m.Subject, l.o.Names), "dropped").Inc()
				dropped.Add(1)
			}
		})
		if err != nil {
			return fmt.Errorf("%w: subscribe %s: %w", ErrUnavailable, subj, err)
		}
		subs = append(subs, s)
	}
	if err := nc.Flush(); err != nil && ctx.Err() == nil {
		l.o.Logger.LogAttrs(ctx, slog.LevelWarn, "ledger: subscriptions not confirmed yet", slog.Any("err", err))
	}
	l.listening(nc, true)
	t := l.o.Clock.NewTimer(l.o.Sweep)
	defer func() { t.Stop() }()
	batch := make([]*nats.Msg, 0, maxBatch)
	// A batch being recorded when ctx ends is finished (within its
	// RecordTimeout), not cut short: the messages are this replica's alone.
	rctx := context.WithoutCancel(ctx)
	for {
		select {
		case <-ctx.Done():
			l.drain(ctx, nc, subs, ch, &handing, batch)
			return nil
		case m := <-ch:
			batch = l.recordWaiting(rctx, batch, m, ch)
		case <-t.C():
			if n := dropped.Swap(0); n > 0 {
				l.o.Logger.LogAttrs(ctx, slog.LevelWarn, "ledger: buffer full, messages dropped (heartbeats will repair)",
					slog.Int64("dropped", n), slog.Int("buffer", l.o.Buffer))
			}
			l.listening(nc, false)
			l.sweep(ctx)
			t = l.o.Clock.NewTimer(l.o.Sweep)
		}
	}
}

// recordWaiting records m and every message already waiting, up to
// maxBatch, together (group commit, see recordBatch), and returns batch
// emptied for reuse.
func (l *Ledger) recordWaiting(ctx context.Context, batch []*nats.Msg, m *nats.Msg, ch <-chan *nats.Msg) []*nats.Msg {
	batch = append(batch[:0], m)
collect:
	for len(batch) < maxBatch {
		select {
		case m := <-ch:
			batch = append(batch, m)
		default:
			break collect
		}
	}
	l.recordBatch(ctx, batch)
	clear(batch)
	return batch[:0]
}

// drain ends Run: the server sends this replica no more messages (the
// other replicas of the queue group take them) and it records those it
// already took: the ones waiting in its buffer and the ones the server
// had sent before it stopped, all within one RecordTimeout. Whatever is
// left then is counted as dropped and logged (heartbeats repair it).
func (l *Ledger) drain(ctx context.Context, nc *nats.Conn, subs []*nats.Subscription, ch <-chan *nats.Msg, handing *sync.RWMutex, batch []*nats.Msg) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.o.RecordTimeout)
	defer cancel()
	var closed []<-chan nats.SubStatus
	for _, s := range subs {
		if !nc.IsConnected() {
			// Nothing more can arrive, and a drain would wait for the
			// connection to flush.
			_ = s.Unsubscribe()
			continue
		}
		c := s.StatusChanged(nats.SubscriptionClosed)
		if err := s.Drain(); err != nil {
			_ = s.Unsubscribe()
			continue
		}
		closed = append(closed, c)
	}
	for len(closed) > 0 && dctx.Err() == nil {
		select {
		case <-closed[0]:
			closed = closed[1:]
		case m := <-ch:
			batch = l.recordWaiting(dctx, batch, m, ch)
		case <-dctx.Done():
		}
	}
	// A callback still handing over the last message it was given.
	handing.Lock()
	handing.Unlock() //nolint:staticcheck // waits for the callbacks in flight
	for dctx.Err() == nil {
		select {
		case m := <-ch:
			batch = l.recordWaiting(dctx, batch, m, ch)
		default:
			return
		}
	}
	if n := len(ch); n > 0 {
		for range n {
			m := <-ch
			l.messages.WithLabelValues(kindOf(m.Subject, l.o.Names), "dropped").Inc()
		}
		l.o.Logger.LogAttrs(ctx, slog.LevelWarn, "ledger: stopped before recording every message it took (heartbeats will repair)",
			slog.Int("dropped", n), slog.Duration("timeout", l.o.RecordTimeout))
	}
}

// listening makes the ledger deaf as of now (see evaluator.evaluate) when
// it starts listening, while the connection is down and when it
// reconnected since the last call: heartbeats sent meanwhile were lost, and
// the instances must not turn GONE before they had the time to be heard
// again.
func (l *Ledger) listening(nc *nats.Conn, start bool) {
	reconnects := nc.Stats().Reconnects
	l.mu.Lock()
	defer l.mu.Unlock()
	if start || !nc.IsConnected() || reconnects != l.reconnects {
		l.deaf = l.o.Clock.Now()
	}
	l.reconnects = reconnects
}

func kindOf(subject string, n watch.Names) string {
	if strings.HasPrefix(subject, strings.TrimSuffix(n.HeartbeatWildcard(), "*")) {
		return "heartbeat"
	}
	return "ack"
}

// sameService refuses a message about another service than its subject's:
// with per-service publish permissions on the subjects, an instance cannot
// speak for another service.
func sameService(subject, service string) error {
	if !strings.HasSuffix(subject, "."+watch.ServiceToken(service)) {
		return fmt.Errorf("%w: subject %s does not belong to service %q", watch.ErrMalformed, subject, service)
	}
	return nil
}

// sweep runs one Sweep of Run, bounded by SweepTimeout.
func (l *Ledger) sweep(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, l.o.SweepTimeout)
	defer cancel()
	if err := l.Sweep(sctx); err != nil {
		l.o.Logger.LogAttrs(ctx, slog.LevelWarn, "ledger sweep failed", slog.Duration("timeout", l.o.SweepTimeout), slog.Any("err", err))
	}
}

// record decodes and records one message, bounded by RecordTimeout.
func (l *Ledger) record(ctx context.Context, m *nats.Msg) {
	msg, err := l.decode(m)
	if err != nil {
		l.malformed(ctx, m, msg.kind, err)
		return
	}
	rctx, cancel := context.WithTimeout(ctx, l.o.RecordTimeout)
	defer cancel()
	l.lookUp(rctx, msg.service, msg.content)
	l.mu.Lock()
	err = l.updateInstance(rctx, msg.service, msg.instance, msg.change)
	l.mu.Unlock()
	if err != nil {
		l.messages.WithLabelValues(msg.kind, "failed").Inc()
		l.o.Logger.LogAttrs(ctx, slog.LevelWarn, "ledger: message not recorded", slog.String("kind", msg.kind), slog.Any("err", err))
		return
	}
	l.messages.WithLabelValues(msg.kind, "recorded").Inc()
}

// malformed counts and logs a message that could not be decoded.
func (l *Ledger) malformed(ctx context.Context, m *nats.Msg, kind string, err error) {
	l.messages.WithLabelValues(kind, "malformed").Inc()
	l.o.Logger.LogAttrs(ctx, slog.LevelWarn, "ledger: malformed message", slog.String("subject", m.Subject), slog.Any("err", err))
}

// message is a decoded report or heartbeat: its kind (ack, nack,
// heartbeat), the instance it is about, what it says of the content
// running (to be looked up before it is recorded) and the change it makes
// to the instance's record.
type message struct {
	kind              string
	service, instance string
	content           *contentCheck
	change            func(in *Instance, now time.Time)
}

// decode parses a message; on error only its kind is set.
func (l *Ledger) decode(m *nats.Msg) (message, error) {
	if kindOf(m.Subject, l.o.Names) == "heartbeat" {
		h, err := watch.DecodeHeartbeat(m.Data)
		if err == nil {
			err = sameService(m.Subject, h.Service)
		}
		if err != nil {
			return message{kind: "heartbeat"}, err
		}
		h.NackError, h.Labels = storable(h.NackError), storableLabels(h.Labels)
		c := heartbeatContent(h)
		return message{kind: "heartbeat", service: h.Service, instance: h.Instance, content: c, change: l.heartbeatChange(h, c)}, nil
	}
	r, err := watch.DecodeReport(m.Data)
	if err != nil {
		return message{kind: "ack"}, err
	}
	kind := "ack"
	if r.Status == watch.StatusNACK {
		kind = "nack"
	}
	if err := sameService(m.Subject, r.Service); err != nil {
		return message{kind: kind}, err
	}
	r.Error, r.Labels = storable(r.Error), storableLabels(r.Labels)
	c := reportContent(r)
	return message{kind: kind, service: r.Service, instance: r.Instance, content: c, change: l.reportChange(r, c)}, nil
}

// storable replaces NUL characters, which PostgreSQL refuses in text, with
// U+FFFD: an SDK whose NACK error held one (an applier quoting binary
// input) repeats it in every heartbeat, and the instance was then never
// recorded again.
func storable(s string) string {
	if strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

// storableLabels is storable for an instance's labels, keys and values.
func storableLabels(m map[string]string) map[string]string {
	clean := true
	for k, v := range m {
		if strings.IndexByte(k, 0) >= 0 || strings.IndexByte(v, 0) >= 0 {
			clean = false
			break
		}
	}
	if clean {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[storable(k)] = storable(v)
	}
	return out
}
