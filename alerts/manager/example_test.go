package manager_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/config"
	"governor.dev/governor/alerts/manager"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/alerts/store"
	"governor.dev/governor/sdk/clock"
)

// A control plane reads its alerting configuration, opens the store in the
// rules database and steps the manager; engine events arrive through
// EngineSink, metrics through QueryFromSource.
func Example() {
	got := make(chan struct{}, 1)
	hook := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { got <- struct{}{} }))
	defer hook.Close()
	// GovernorLeaderLost is not built in; a configuration may still
	// declare it as an event rule on leader_lost, cleared by
	// leader_acquired.
	cfg, err := config.Parse([]byte(`{"builtin_rules": "enabled", "timing": {"group_wait": "10s"},
		"rules": [{"name": "GovernorLeaderLost", "event": "leader_lost", "severity": "P0"}],
		"receivers": [{"name": "oncall", "webhook": {"url": "` + hook.URL + `"}}]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	dir, _ := os.MkdirTemp("", "alerts-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, filepath.Join(dir, "governor.db"), store.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	receivers, _ := cfg.Notifiers(nil)
	clk := clock.NewFake(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))
	m, err := manager.New(ctx, manager.Options{
		Rules: cfg.RuleSet(), Routes: cfg.Routes, Timing: cfg.DispatchTiming(), Inhibit: cfg.InhibitRules(),
		Receivers: receivers, Store: st, Clock: clk, Logger: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry(),
		// Query: manager.QueryFromSource(metricsSource),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	_ = m.Observe(rule.Event{Kind: rule.EventLeaderLost, At: clk.Now()})
	_ = m.Step(ctx, clk.Now()) // raised; the group waits 10s
	clk.Advance(10 * time.Second)
	_ = m.Step(ctx, clk.Now()) // sent
	select {
	case <-got:
	case <-time.After(time.Minute): // never hang: the output then differs
		fmt.Println("no notification")
	}
	for _, a := range m.Alerts(clk.Now()) {
		fmt.Println(a.Labels["alertname"], a.Severity(), a.Labels[alerts.SeverityLabel])
	}
	// Output: GovernorLeaderLost P0 P0
}
