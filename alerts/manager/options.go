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
	// default to a single route to it.
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

	Clock      clock.Clock
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

func (o Options) withDefaults() (Options, error) {
	if o.Store == nil {
		return o, fmt.Errorf("%w: manager: store is required", alerts.ErrInvalid)
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
