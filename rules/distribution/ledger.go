package distribution

import (
	"context"
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
	// instance.
	GoneAfter time.Duration
	// GoneBeats: missed heartbeats that make an instance GONE; default 3.
	GoneBeats int
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
	// Buffer bounds the messages waiting to be recorded; default 8192.
	// Beyond it messages are dropped and counted (heartbeats repair the
	// ledger).
	Buffer     int
	Clock      clock.Clock
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// DefaultLedgerOptions returns the defaults of the optional fields.
func DefaultLedgerOptions() LedgerOptions {
	return LedgerOptions{Grace: 30 * time.Second, GoneAfter: 35 * time.Second, GoneBeats: 3, Sweep: 5 * time.Second,
		QueueGroup: "governor-ledger", Buffer: 8192, Clock: clock.Real{}, Logger: slog.New(slog.DiscardHandler)}
}

// Ledger records what every instance runs.
type Ledger struct {
	o    LedgerOptions
	eval evaluator
	mu   sync.Mutex // serialises read-modify-write of instances and targets

	messages *prometheus.CounterVec // kind, result
	states   *prometheus.GaugeVec   // service, state
	moves    *prometheus.CounterVec // to
}

// NewLedger checks the options and returns a ledger.
func NewLedger(o LedgerOptions) (*Ledger, error) {
	d := DefaultLedgerOptions()
	if o.Store == nil {
		return nil, fmt.Errorf("%w: ledger: Store is required", ErrInvalid)
	}
	if o.Grace < 0 || o.GoneAfter < 0 || o.GoneBeats < 0 || o.Sweep < 0 || o.Buffer < 0 {
		return nil, fmt.Errorf("%w: ledger: durations and counts must not be negative", ErrInvalid)
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
	if o.Sweep == 0 {
		o.Sweep = d.Sweep
	}
	if o.QueueGroup == "" {
		o.QueueGroup = d.QueueGroup
	}
	if o.Buffer == 0 {
		o.Buffer = d.Buffer
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
// the signature of RelayOptions.OnPublished.
func (l *Ledger) Published(ctx context.Context, env *rules.Envelope, canary *watch.Selector) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, _, err := l.o.Store.Target(ctx, env.Service)
	if err != nil {
		return fmt.Errorf("distribution: ledger target: %w", err)
	}
	t.Service = env.Service
	now := l.o.Clock.Now()
	if canary != nil {
		sel := *canary
		sel.Labels = maps.Clone(sel.Labels)
		t.Canary, t.CanaryAt, t.Selector = env.Version, now, &sel
	} else {
		advanceStable(&t, env.Version, now)
	}
	if err := l.o.Store.SetTarget(ctx, t); err != nil {
		return fmt.Errorf("distribution: ledger target: %w", err)
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

// Aborted records that a service's staged version was withdrawn.
func (l *Ledger) Aborted(ctx context.Context, service string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok, err := l.o.Store.Target(ctx, service)
	if err != nil || !ok {
		return err
	}
	t.Canary, t.CanaryAt, t.Selector = 0, time.Time{}, nil
	if err := l.o.Store.SetTarget(ctx, t); err != nil {
		return fmt.Errorf("distribution: ledger target: %w", err)
	}
	return l.reevaluate(ctx, t)
}

// HandleReport records an ACK or NACK.
func (l *Ledger) HandleReport(ctx context.Context, r *watch.Report) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.o.Clock.Now()
	in, err := l.instance(ctx, r.Service, r.Instance, now)
	if err != nil {
		return err
	}
	in.LastSeen = now
	in.Running = r.Running
	if r.Labels != nil {
		in.Labels = maps.Clone(r.Labels)
	}
	if r.Status == watch.StatusACK {
		in.AckVersion = max(in.AckVersion, r.Version)
	} else {
		in.NackVersion, in.NackReason, in.NackError, in.NackAt = r.Version, string(r.Reason), r.Error, now
	}
	return l.save(ctx, in, now)
}

// HandleHeartbeat records a heartbeat.
func (l *Ledger) HandleHeartbeat(ctx context.Context, h *watch.Heartbeat) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.o.Clock.Now()
	in, err := l.instance(ctx, h.Service, h.Instance, now)
	if err != nil {
		return err
	}
	in.LastSeen, in.Running, in.HeartbeatMS = now, h.Running, h.IntervalMS
	in.Labels = maps.Clone(h.Labels)
	if h.NackError != "" && (h.NackVersion != in.NackVersion || h.NackError != in.NackError) {
		// A NACK this ledger missed (it was down or disconnected).
		in.NackVersion, in.NackReason, in.NackError, in.NackAt = h.NackVersion, string(h.NackReason), h.NackError, now
	}
	return l.save(ctx, in, now)
}

// instance loads an instance or starts a new record.
func (l *Ledger) instance(ctx context.Context, service, instance string, now time.Time) (Instance, error) {
	in, ok, err := l.o.Store.Instance(ctx, service, instance)
	if err != nil {
		return Instance{}, fmt.Errorf("distribution: ledger instance: %w", err)
	}
	if !ok {
		in = Instance{Service: service, Instance: instance, Since: now}
	}
	return in, nil
}

// save evaluates the instance and writes it with a transition if its state
// changed.
func (l *Ledger) save(ctx context.Context, in Instance, now time.Time) error {
	t, err := l.target(ctx, in.Service)
	if err != nil {
		return err
	}
	return l.saveAgainst(ctx, in, t, now, true)
}

// target returns the service's target, seeding it from Latest when the
// ledger has none.
func (l *Ledger) target(ctx context.Context, service string) (Target, error) {
	t, ok, err := l.o.Store.Target(ctx, service)
	if err != nil {
		return t, fmt.Errorf("distribution: ledger target: %w", err)
	}
	t.Service = service
	if ok || l.o.Latest == nil {
		return t, nil
	}
	v, err := l.o.Latest(ctx, service)
	if err != nil {
		return t, fmt.Errorf("distribution: ledger target of %s: %w", service, err)
	}
	if v > 0 {
		t.Stable, t.StableAt = v, l.o.Clock.Now()
		if err := l.o.Store.SetTarget(ctx, t); err != nil {
			return t, fmt.Errorf("distribution: ledger target: %w", err)
		}
	}
	return t, nil
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
	moved := t
	advanceStable(&moved, v, l.o.Clock.Now())
	if err := l.o.Store.SetTarget(ctx, moved); err != nil {
		return t, fmt.Errorf("distribution: ledger target: %w", err)
	}
	l.o.Logger.LogAttrs(ctx, slog.LevelInfo, "ledger: caught up with a publication it missed",
		slog.String("service", t.Service), slog.Int64("recorded", t.Stable), slog.Int64("version", v))
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

// saveAgainst evaluates the instance against t and writes it; unless
// changed is set (the record itself changed) it writes only when the state
// or the target moved.
func (l *Ledger) saveAgainst(ctx context.Context, in Instance, t Target, now time.Time, changed bool) error {
	state, want, detail := l.eval.evaluate(&in, t, now)
	if !changed && state == in.State && want == in.Target {
		return nil
	}
	var tr *Transition
	if state != in.State {
		tr = &Transition{Service: in.Service, Instance: in.Instance, From: in.State, To: state,
			Target: want, Running: in.Running, Detail: detail, At: now}
		in.State, in.Since = state, now
		l.moves.WithLabelValues(string(state)).Inc()
	}
	in.Target = want
	if err := l.o.Store.SaveInstance(ctx, in, tr); err != nil {
		return fmt.Errorf("distribution: ledger save %s/%s: %w", in.Service, in.Instance, err)
	}
	return nil
}

// reevaluate re-evaluates every instance of the target's service.
func (l *Ledger) reevaluate(ctx context.Context, t Target) error {
	ins, err := l.o.Store.Instances(ctx, t.Service)
	if err != nil {
		return fmt.Errorf("distribution: ledger instances: %w", err)
	}
	now := l.o.Clock.Now()
	for _, in := range ins {
		if err := l.saveAgainst(ctx, in, t, now, false); err != nil {
			return err
		}
	}
	return nil
}

// Sweep re-evaluates every instance (time makes instances STALE or GONE)
// and refreshes the per-state gauges. With LedgerOptions.Latest, it first
// moves each service's stable version up to the bucket's, should the ledger
// have missed a publication; if the bucket cannot be read, the sweep goes on
// with the recorded targets.
func (l *Ledger) Sweep(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	ins, err := l.o.Store.Instances(ctx, "")
	if err != nil {
		return fmt.Errorf("distribution: ledger instances: %w", err)
	}
	now := l.o.Clock.Now()
	targets := map[string]Target{}
	counts := map[string]map[State]int{}
	latest := l.o.Latest
	for _, in := range ins {
		t, ok := targets[in.Service]
		if !ok {
			if t, err = l.target(ctx, in.Service); err != nil {
				return err
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
			targets[in.Service] = t
		}
		if err := l.saveAgainst(ctx, in, t, now, false); err != nil {
			return err
		}
		state, _, _ := l.eval.evaluate(&in, t, now)
		if counts[in.Service] == nil {
			counts[in.Service] = map[State]int{}
		}
		counts[in.Service][state]++
	}
	for svc, c := range counts {
		for _, s := range States {
			l.states.WithLabelValues(svc, string(s)).Set(float64(c[s]))
		}
	}
	return nil
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
func (l *Ledger) Run(ctx context.Context, nc *nats.Conn) error {
	ch := make(chan *nats.Msg, l.o.Buffer)
	var dropped atomic.Int64 // since the last sweep, for the warning
	var subs []*nats.Subscription
	defer func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	}()
	for _, subj := range []string{l.o.Names.ReportWildcard(), l.o.Names.HeartbeatWildcard()} {
		s, err := nc.QueueSubscribe(subj, l.o.QueueGroup, func(m *nats.Msg) {
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
	t := l.o.Clock.NewTimer(l.o.Sweep)
	defer func() { t.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-ch:
			l.record(ctx, m)
		case <-t.C():
			if n := dropped.Swap(0); n > 0 {
				l.o.Logger.LogAttrs(ctx, slog.LevelWarn, "ledger: buffer full, messages dropped (heartbeats will repair)",
					slog.Int64("dropped", n), slog.Int("buffer", l.o.Buffer))
			}
			if err := l.Sweep(ctx); err != nil {
				l.o.Logger.LogAttrs(ctx, slog.LevelWarn, "ledger sweep failed", slog.Any("err", err))
			}
			t = l.o.Clock.NewTimer(l.o.Sweep)
		}
	}
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

// record decodes and records one message.
func (l *Ledger) record(ctx context.Context, m *nats.Msg) {
	kind, handle, err := l.decode(m)
	if err != nil {
		l.messages.WithLabelValues(kind, "malformed").Inc()
		l.o.Logger.LogAttrs(ctx, slog.LevelWarn, "ledger: malformed message", slog.String("subject", m.Subject), slog.Any("err", err))
		return
	}
	if err := handle(ctx); err != nil {
		l.messages.WithLabelValues(kind, "failed").Inc()
		l.o.Logger.LogAttrs(ctx, slog.LevelWarn, "ledger: message not recorded", slog.String("kind", kind), slog.Any("err", err))
		return
	}
	l.messages.WithLabelValues(kind, "recorded").Inc()
}

// decode parses a message into its kind and the call that records it.
func (l *Ledger) decode(m *nats.Msg) (string, func(context.Context) error, error) {
	if kindOf(m.Subject, l.o.Names) == "heartbeat" {
		h, err := watch.DecodeHeartbeat(m.Data)
		if err == nil {
			err = sameService(m.Subject, h.Service)
		}
		return "heartbeat", func(ctx context.Context) error { return l.HandleHeartbeat(ctx, h) }, err
	}
	r, err := watch.DecodeReport(m.Data)
	if err != nil {
		return "ack", nil, err
	}
	kind := "ack"
	if r.Status == watch.StatusNACK {
		kind = "nack"
	}
	return kind, func(ctx context.Context) error { return l.HandleReport(ctx, r) }, sameService(m.Subject, r.Service)
}
