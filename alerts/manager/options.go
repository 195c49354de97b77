package manager

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/dispatch"
	"governor.dev/governor/alerts/inhibit"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/alerts/store"
	"governor.dev/governor/sdk/clock"
)

// Options configure a Manager. Store and Receivers are required.
type Options struct {
	// Rules default to rule.Builtin(). The receiver-failing rule is always
	// added when missing.
	Rules []rule.Rule
	// Query evaluates PromQL rules; nil leaves them failing with an error
	// per evaluation (event rules still work).
	Query rule.QueryFunc
	// Routes are required with several receivers; with one receiver they
	// default to a single route to it. One must catch every alert
	// (dispatch.ValidateRoutes).
	Routes []dispatch.Route
	Timing dispatch.Timing
	// Inhibit defaults to inhibit.Defaults(); NoInhibition turns it off.
	Inhibit      []inhibit.Rule
	NoInhibition bool
	// Receivers by name.
	Receivers map[string]notify.Notifier
	Store     store.Store
	// Queue tunes every receiver queue (Clock, Logger, Metrics and
	// OnResult are set by the manager): Queue.Capacity bounds the
	// notifications waiting for each receiver, default
	// notify.DefaultCapacity. A notification dropped on a full queue is
	// taken back from its group and sent again at the group interval, as
	// one the receiver gave up on. Negative fields are refused.
	Queue notify.QueueOptions
	// Interval between steps of Run; default 15s.
	Interval time.Duration
	// Retention keeps history and delivered notifications this long;
	// default 30 days. Step prunes at most once an hour.
	Retention time.Duration
	// SilenceRetention keeps a silence this long after it ended (listed,
	// and expirable again without effect), then Step deletes it, from the
	// store too; default DefaultSilenceRetention (120h, as Alertmanager's
	// --data.retention). Negative is refused.
	SilenceRetention time.Duration
	// DroppingFor is how long a receiver's full queue may keep dropping
	// notifications before the receiver counts as failing, as one that
	// gives up does (GovernorAlertReceiverFailing); default
	// DefaultDroppingFor. Drops less than DroppingFor apart (or, if longer,
	// the group interval plus Interval: a dropped notification is sent again
	// at the group interval) form one run; the receiver recovers once its
	// queue has dropped nothing for as long. Negative is refused.
	DroppingFor time.Duration
	// Standby starts the manager as a standby replica's: it loads the
	// state but queues none of the undelivered notifications of the log,
	// sends nothing and refuses Step (ErrStandby) until Lead is called,
	// when this replica takes the lead. Without it the manager leads from
	// the start, as a single process does.
	Standby bool
	// EventMaxAge bounds how old an engine event may be when the leader
	// evaluates it after another replica forwarded it (a standby's events,
	// those queued when a lead ended): older ones are dropped, counted and
	// logged, so that a replica that could not reach the store for long
	// raises or clears nothing stale. Default DefaultEventMaxAge; negative
	// is refused.
	EventMaxAge time.Duration

	Clock      clock.Clock
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// DefaultSilenceRetention is Options.SilenceRetention unless set.
const DefaultSilenceRetention = 120 * time.Hour

// DefaultEventMaxAge is Options.EventMaxAge unless set.
const DefaultEventMaxAge = 10 * time.Minute

// DefaultDroppingFor is Options.DroppingFor unless set.
const DefaultDroppingFor = 10 * time.Minute

func (o Options) withDefaults() (Options, error) {
	if o.Store == nil {
		return o, fmt.Errorf("%w: manager: store is required", alerts.ErrInvalid)
	}
	if o.SilenceRetention < 0 {
		return o, fmt.Errorf("%w: manager: SilenceRetention: must not be negative, got %s", alerts.ErrInvalid, o.SilenceRetention)
	}
	if o.DroppingFor < 0 {
		return o, fmt.Errorf("%w: manager: DroppingFor: must not be negative, got %s", alerts.ErrInvalid, o.DroppingFor)
	}
	if o.EventMaxAge < 0 {
		return o, fmt.Errorf("%w: manager: EventMaxAge: must not be negative, got %s", alerts.ErrInvalid, o.EventMaxAge)
	}
	if err := o.Queue.Validate(); err != nil {
		return o, fmt.Errorf("manager: %w", err)
	}
	if o.Rules == nil {
		o.Rules = rule.Builtin()
	}
	if !slices.ContainsFunc(o.Rules, func(r rule.Rule) bool { return r.Name == rule.ReceiverFailingRule }) {
		o.Rules = append(slices.Clone(o.Rules), rule.ReceiverFailing())
	}
	rt, err := Routing{Routes: o.Routes, Timing: o.Timing, Inhibit: o.Inhibit, NoInhibition: o.NoInhibition,
		Receivers: o.Receivers}.withDefaults()
	if err != nil {
		return o, err
	}
	o.Routes, o.Inhibit = rt.Routes, rt.Inhibit
	if o.Interval <= 0 {
		o.Interval = 15 * time.Second
	}
	if o.Retention <= 0 {
		o.Retention = 30 * 24 * time.Hour
	}
	if o.SilenceRetention == 0 {
		o.SilenceRetention = DefaultSilenceRetention
	}
	if o.DroppingFor == 0 {
		o.DroppingFor = DefaultDroppingFor
	}
	if o.EventMaxAge == 0 {
		o.EventMaxAge = DefaultEventMaxAge
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Registerer == nil {
		o.Registerer = prometheus.NewRegistry()
	}
	return o, nil
}
