package manager

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/notify"
)

type metrics struct {
	alerts      *prometheus.GaugeVec
	muted       *prometheus.GaugeVec
	evals       prometheus.Counter
	evalErrors  prometheus.Counter
	storeErrors prometheus.Counter
	events      *prometheus.CounterVec
	eventsDrop  *prometheus.CounterVec
	discarded   prometheus.Counter
	delivery    *notify.Metrics
}

func newMetrics(r prometheus.Registerer) *metrics {
	f := promauto.With(r)
	m := &metrics{
		alerts: f.NewGaugeVec(prometheus.GaugeOpts{Name: "governor_alerts_alerts",
			Help: "Alerts by state (pending, firing) and severity."}, []string{"state", "severity"}),
		muted: f.NewGaugeVec(prometheus.GaugeOpts{Name: "governor_alerts_muted",
			Help: "Firing alerts kept quiet, by reason (silenced, inhibited, acknowledged)."}, []string{"reason"}),
		evals: f.NewCounter(prometheus.CounterOpts{Name: "governor_alerts_evaluations_total",
			Help: "Evaluation steps run."}),
		evalErrors: f.NewCounter(prometheus.CounterOpts{Name: "governor_alerts_rule_errors_total",
			Help: "Rule evaluations that failed (query errors)."}),
		storeErrors: f.NewCounter(prometheus.CounterOpts{Name: "governor_alerts_store_errors_total",
			Help: "Writes to the alerts store that failed."}),
		events: f.NewCounterVec(prometheus.CounterOpts{Name: "governor_alerts_events_total",
			Help: "Engine events observed, by whether a rule listens (matched, unmatched), or forwarded to the leader by a standby (forwarded)."}, []string{"result"}),
		eventsDrop: f.NewCounterVec(prometheus.CounterOpts{Name: "governor_alerts_events_dropped_total",
			Help: "Engine events dropped unevaluated, by reason (stale: older than EventMaxAge; full: a standby's forward buffer was full; closed: held by a standby the store did not take before Close)."}, []string{"reason"}),
		discarded: f.NewCounter(prometheus.CounterOpts{Name: "governor_alerts_notifications_discarded_total",
			Help: "Undelivered notifications of receivers no longer configured, closed unsent at start."}),
		delivery: notify.NewMetrics(r),
	}
	for _, st := range []alerts.State{alerts.StatePending, alerts.StateFiring} {
		for _, s := range []alerts.Severity{alerts.P0, alerts.P1, alerts.P2} {
			m.alerts.WithLabelValues(st.String(), string(s))
		}
	}
	for _, r := range []string{"silenced", "inhibited", "acknowledged"} {
		m.muted.WithLabelValues(r)
	}
	m.events.WithLabelValues("matched")
	m.events.WithLabelValues("unmatched")
	m.events.WithLabelValues("forwarded")
	m.eventsDrop.WithLabelValues("stale")
	m.eventsDrop.WithLabelValues("full")
	m.eventsDrop.WithLabelValues("closed")
	return m
}
