package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	alertsapi "governor.dev/governor/alerts/api"
	alerts "governor.dev/governor/alerts/manager"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/store"
	"governor.dev/governor/engine/api"
	"governor.dev/governor/migrations"
	"governor.dev/governor/ui"
	"governor.dev/governor/ui/alertsource"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/canarysource"
	"governor.dev/governor/ui/enginesource"
	"governor.dev/governor/ui/model"
	"governor.dev/governor/ui/signalsource"
)

// dialect is the rules database's migrations dialect.
func (a *App) dialect() migrations.Dialect {
	if a.cfg.Database != "" {
		return migrations.Postgres
	}
	return migrations.SQLite
}

// startAlerts opens the alerts store on the rules database and builds the
// manager: the configured rules and receivers (Options.Alerts), or the
// built-in rules with one receiver that only logs.
func (a *App) startAlerts(ctx context.Context) error {
	st, err := store.New(ctx, a.ledgerDB, a.dialect(), store.Options{Logger: a.log})
	if err != nil {
		return fmt.Errorf("%w: alerts store: %w", ErrStart, err)
	}
	mo := alerts.Options{Query: alerts.QueryFromSource(a.source), Store: st, Interval: a.o.AlertInterval,
		Clock: a.o.Clock, Logger: a.log, Registerer: a.o.Registry, Standby: true,
		SilenceRetention: a.cfg.Alerts.SilenceRetention, DroppingFor: a.cfg.Alerts.ReceiverDroppingFor}
	if c := a.o.Alerts; c != nil {
		if err := c.Validate(); err != nil {
			return fmt.Errorf("%w: alerts: %w", ErrStart, err)
		}
		mo.Rules, mo.Routes, mo.Timing, mo.Inhibit = c.RuleSet(), c.Routes, c.DispatchTiming(), c.InhibitRules()
		mo.NoInhibition = len(mo.Inhibit) == 0
		if mo.Receivers, err = c.Notifiers(nil); err != nil {
			return fmt.Errorf("%w: alerts: %w", ErrStart, err)
		}
	}
	if len(mo.Receivers) == 0 {
		mo.Receivers, mo.Routes = map[string]notify.Notifier{"log": logReceiver{log: a.log}}, nil
	}
	if a.alerts, err = alerts.New(ctx, mo); err != nil {
		return fmt.Errorf("%w: alerts: %w", ErrStart, err)
	}
	m := a.alerts
	a.onClose("alerts manager", func() { _ = m.Close() })
	return nil
}

// logReceiver is the receiver of a stack without configured receivers: it
// logs each notification.
type logReceiver struct{ log *slog.Logger }

var _ notify.Notifier = logReceiver{}

// Notify implements notify.Notifier.
func (l logReceiver) Notify(_ context.Context, m *notify.Message) (bool, error) {
	names := make([]string, 0, len(m.Alerts))
	for _, al := range m.Alerts {
		names = append(names, al.Labels["alertname"]+" "+al.Labels["service"])
	}
	l.log.Warn("alert notification", "kind", m.Kind, "status", m.Status, "severity", m.Severity,
		"group", m.GroupKey, "alerts", names, "summary", m.CommonAnnotations["summary"])
	return false, nil
}

// runAlerts steps the alerts manager on its interval while this replica
// leads, so that two engines on one database never notify twice (see
// stepAlerts).
func (a *App) runAlerts(ctx context.Context) {
	every := a.o.AlertInterval
	if every <= 0 {
		every = 15 * time.Second
	}
	defer a.endAlertsLead()
	for {
		a.stepAlerts(ctx, a.alerts)
		t := a.o.Clock.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// alertsManager is what the app does with the alerts manager as the lead
// comes and goes (alerts.Manager).
type alertsManager interface {
	Lead(ctx context.Context) error
	Standby()
	Step(ctx context.Context, now time.Time) error
	Follow(ctx context.Context, now time.Time) error
}

// alertsLead is a lead of this replica as the alerts manager follows it
// (stepAlerts): stood is closed once the manager stood by at its end.
type alertsLead struct {
	ctx    context.Context
	cancel context.CancelFunc
	stood  chan struct{}
}

// stepAlerts runs one step of the alerts manager if this replica leads,
// under its lead context: a step in whose middle the lead is lost stops
// rather than saving and notifying beside the next leader's. The manager
// sends notifications only while the replica leads: at a new lead it first
// queues what the log holds undelivered (Lead: what the replica before it
// logged and did not deliver), and the moment that lead ends it stops
// sending (Standby, run when the lead context ends, not at the next step),
// leaving its queued notifications in the log for the next leader. A Lead
// that fails (the store could not be read) is tried again at the next step,
// with no step meanwhile. Called from the runAlerts goroutine only.
func (a *App) stepAlerts(ctx context.Context, m alertsManager) {
	if l := a.alertsLead; l != nil && l.ctx.Err() != nil {
		<-l.stood // a Lead must not run before the last lead's Standby
		a.alertsLead = nil
	}
	if a.alertsLead == nil {
		lctx, cancel := a.elector.LeaderContext(ctx)
		if lctx.Err() != nil {
			cancel()
			// A standby's step only reads what the other replicas wrote
			// (silences, acknowledgements, the leader's alerts), so that
			// its web UI and API show them.
			if err := m.Follow(ctx, a.o.Clock.Now()); err != nil && ctx.Err() == nil {
				a.log.Warn("alerts step (standby): reading what the other replicas wrote", "err", err)
			}
			return
		}
		if err := m.Lead(lctx); err != nil {
			cancel()
			a.log.Warn("alerts: taking the lead: undelivered notifications not loaded, retried at the next step", "err", err)
			return
		}
		l := &alertsLead{ctx: lctx, cancel: cancel, stood: make(chan struct{})}
		context.AfterFunc(lctx, func() {
			m.Standby()
			close(l.stood)
		})
		a.alertsLead = l
	}
	lctx := a.alertsLead.ctx
	if err := m.Step(lctx, a.o.Clock.Now()); err != nil && lctx.Err() == nil {
		a.log.Warn("alerts step", "err", err)
	}
}

// endAlertsLead ends the alerts manager's lead at a stop and waits until
// it stood by.
func (a *App) endAlertsLead() {
	if l := a.alertsLead; l != nil {
		l.cancel()
		<-l.stood
		a.alertsLead = nil
	}
}

// startUI opens the accounts on the rules database, creates the first
// admin with a one-time password (kept for the banner) and builds the web
// UI over the engine's own evaluator, ledger, publisher, metrics and
// alerts.
func (a *App) startUI(ctx context.Context) error {
	am, err := auth.New(ctx, auth.Options{DB: a.ledgerDB, Dialect: a.dialect(), Auditor: a.store, Clock: a.o.Clock,
		Logger: a.log, BcryptCost: a.o.BcryptCost})
	if err != nil {
		return fmt.Errorf("%w: ui auth: %w", ErrStart, err)
	}
	admin := a.o.Admin
	if admin == "" {
		admin = "admin"
	}
	if a.adminEnsured, err = am.EnsureAdminReport(ctx, admin); err != nil {
		return fmt.Errorf("%w: ui admin: %w", ErrStart, err)
	}
	// Scores older than twelve evaluation intervals (as engineclient's
	// DefaultMaxAge at the default interval) are not shown as live: the
	// evaluator keeps its last scores while it cannot read its metrics.
	es, err := enginesource.New(enginesource.Options{Scores: a.eval, Ledger: a.plane.Ledger(), Relay: a.plane, AlertLevels: a.eval.AlertLevelsInForce,
		MaxAge: 12 * a.cfg.Interval, Clock: a.o.Clock,
		Levels: func(service string) (model.LatencyLevels, bool) {
			if a.p99Levels == nil {
				return model.LatencyLevels{}, false
			}
			lv, ok := a.p99Levels(service)
			return model.LatencyLevels(lv), ok
		}})
	if err != nil {
		return fmt.Errorf("%w: ui fleet: %w", ErrStart, err)
	}
	fleet, err := signalsource.Enrich(es, a.reader, a.o.Clock)
	if err != nil {
		return fmt.Errorf("%w: ui fleet: %w", ErrStart, err)
	}
	charts, err := signalsource.New(signalsource.Options{Source: a.source, Clock: a.o.Clock})
	if err != nil {
		return fmt.Errorf("%w: ui charts: %w", ErrStart, err)
	}
	rollouts, err := canarysource.New(a.plane)
	if err != nil {
		return fmt.Errorf("%w: ui rollouts: %w", ErrStart, err)
	}
	al, err := alertsource.New(alertsource.Options{Manager: a.alerts, Clock: a.o.Clock})
	if err != nil {
		return fmt.Errorf("%w: ui alerts: %w", ErrStart, err)
	}
	var alertService *alertsapi.Service
	if a.alerts != nil {
		if alertService, err = alertsapi.New(a.alerts, alertsapi.Options{Clock: a.o.Clock}); err != nil {
			return fmt.Errorf("%w: ui alert service: %w", ErrStart, err)
		}
	}
	srv, err := ui.NewServer(ui.Options{Rules: a.store, Auth: am, Fleet: fleet, Alerts: al, Rollouts: rollouts, Charts: charts,
		AlertRouting: a.routingStore(), AlertBootstrap: a.alertBootstrap(), ConfigBand: a.configBand, AlertService: alertService,
		Clock: a.o.Clock, Logger: a.log, Registerer: a.o.Registry, Stopping: a.stopping})
	if err != nil {
		return fmt.Errorf("%w: ui: %w", ErrStart, err)
	}
	a.ui = srv
	// The UI's background work (the audit chain's whole walks) lasts as
	// long as the App: close stops it before the stores it reads close.
	bctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() { defer close(done); srv.Run(bctx) }()
	a.onClose("web UI background work", func() { stop(); <-done })
	return nil
}

// combine serves the engine's endpoints (/healthz, /readyz, /metrics and
// the read API under api.Prefix) and, when web is not nil, everything else
// from the web UI, whose /api/v1 is authenticated. Nothing of the engine is
// served under /api/v1.
func combine(engine, web http.Handler) http.Handler {
	if web == nil {
		return engine
	}
	mux := http.NewServeMux()
	for _, p := range []string{"GET /healthz", "GET /readyz", "GET /metrics", api.Prefix + "/"} {
		mux.Handle(p, engine)
	}
	mux.Handle("/", web)
	return mux
}
