package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"governor.dev/governor/alerts"
	alertsconfig "governor.dev/governor/alerts/config"
	"governor.dev/governor/alerts/configstore"
	alertsmanager "governor.dev/governor/alerts/manager"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/model"
)

// alertRouting applies the alerting configuration saved in the web UI
// (alerts/configstore) to the running alerts manager.
//
// Precedence: the newest saved version is in force; the configuration file
// (Options.Alerts, from alerts.config_file or GOVERNOR_ALERTS_CONFIG) or,
// without one, the built-in rules and a receiver that only logs, is the
// bootstrap that applies while nothing has been saved. A saved version is
// applied at start and then picked up without a restart, at once when the
// UI of this process saved it, else by a poll every AlertInterval (default
// 15s): routes, timing, inhibition and receivers through Reconfigure
// (notifications already queued finish on the old receivers), then rules
// through UpdateRules, all or nothing (apply). A version that no longer
// builds (it was valid when saved), or whose routing the manager refuses,
// is logged and skipped; the one in force stays, rules and routing.
type alertRouting struct {
	store   *configstore.Store
	manager *alertsmanager.Manager
	applied int64 // guarded by mu
	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
}

// startAlertRouting opens the saved versions on the rules database,
// applies the newest one and starts the poll; the closer stops it.
func (a *App) startAlertRouting(ctx context.Context) error {
	st, err := configstore.New(ctx, a.ledgerDB, a.dialect(), configstore.Options{Clock: a.o.Clock, Logger: a.log})
	if err != nil {
		return fmt.Errorf("%w: alert routing: %w", ErrStart, err)
	}
	r := &alertRouting{store: st, manager: a.alerts, done: make(chan struct{})}
	switch err := r.poll(ctx); {
	case errors.Is(err, errVersionUnusable):
		// Saved under rules an older release accepted: the engine still
		// starts, on the routing in force, and says why.
		a.log.Error("alert routing: saved configuration not applied; the configuration file's routing stays", "err", err)
	case err != nil:
		return fmt.Errorf("%w: alert routing: %w", ErrStart, err)
	}
	every := a.o.AlertInterval
	if every <= 0 {
		every = 15 * time.Second
	}
	pctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		for {
			t := a.o.Clock.NewTimer(every)
			select {
			case <-pctx.Done():
				t.Stop()
				return
			case <-t.C():
			case <-st.Saved(): // saved by the UI in this process
				t.Stop()
			}
			if err := r.poll(pctx); err != nil && pctx.Err() == nil {
				a.log.Warn("alert routing: saved configuration not applied", "err", err)
			}
		}
	}()
	a.routing = r
	a.onClose("alert routing watch", func() { cancel(); <-r.done })
	return nil
}

// errVersionUnusable: the newest saved version does not build (any more).
var errVersionUnusable = errors.New("saved version unusable")

// poll applies the newest saved version if it is newer than the applied one.
// A version that does not build is skipped for good (errVersionUnusable).
func (r *alertRouting) poll(ctx context.Context) error {
	v, err := r.store.Latest(ctx)
	if errors.Is(err, alerts.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if v.Number <= r.applied {
		return nil
	}
	if err := apply(r.manager, v); err != nil {
		r.applied = v.Number // do not retry a version that cannot build
		return fmt.Errorf("%w: version %d: %w", errVersionUnusable, v.Number, err)
	}
	r.applied = v.Number
	return nil
}

// apply builds and validates every part of a version before changing
// anything, and applies it whole or not at all. The routing goes first:
// Reconfigure validates it whole and refuses it, changing nothing, on any
// error (a closed manager included), which document validation cannot
// foresee. The rules, validated beforehand as UpdateRules validates them,
// then cannot be refused, so a refused routing never leaves the new rules
// in force with the old routing.
func apply(m *alertsmanager.Manager, v configstore.Version) error {
	c, err := v.Config()
	if err != nil {
		return err
	}
	rules := c.RuleSet()
	if err := rule.ValidateSet(rules); err != nil {
		return err
	}
	recv, err := c.Notifiers(nil)
	if err != nil {
		return err
	}
	rt := alertsmanager.Routing{Routes: c.Routes, Timing: c.DispatchTiming(), Inhibit: c.InhibitRules(), Receivers: recv}
	rt.NoInhibition = len(rt.Inhibit) == 0
	if err := m.Reconfigure(rt); err != nil {
		return err
	}
	if err := m.UpdateRules(rules); err != nil {
		// Not reached: UpdateRules refuses only what ValidateSet refuses.
		return fmt.Errorf("routing applied, rules not: %w", err)
	}
	return nil
}

// routingStore is the UI's store of saved versions (nil before start).
func (a *App) routingStore() model.AlertRouting {
	if a.routing == nil {
		return nil
	}
	return a.routing.store
}

// alertBootstrap is the configuration file's document as the UI shows it
// while nothing has been saved ("" without a file).
func (a *App) alertBootstrap() string {
	if a.o.Alerts == nil {
		return ""
	}
	b, err := json.MarshalIndent(a.o.Alerts, "", "  ")
	if err != nil {
		return ""
	}
	if _, err := alertsconfig.Parse(b); err != nil {
		return ""
	}
	return string(b)
}

// configBand is the engine's configured band of a service, for the
// settings page (which shows it where no policy band is set).
func (a *App) configBand(service string) (versioning.AutoApplyBand, bool) {
	b := a.band(service)
	return versioning.AutoApplyBand{MaxChangePerHour: b.MaxChangePerHour, Floor: b.Floor, Ceiling: b.Ceiling}, b.Manual
}
