package ui

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/rules/versioning"
)

// Results of a whole walk of the audit chain, the label of
// governor_ui_audit_whole_walks_total.
const (
	walkPassed = "passed"
	walkBroken = "broken"
	walkFailed = "failed" // the store did not answer
)

// auditMetrics tell an alert what the audit chain's checks found.
type auditMetrics struct {
	walks *prometheus.CounterVec
	reg   prometheus.Registerer
}

func newAuditMetrics(reg prometheus.Registerer) (*auditMetrics, error) {
	m := &auditMetrics{reg: reg, walks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "governor_ui_audit_whole_walks_total",
		Help: "Whole walks of the audit hash chain (background and asked for), by result: passed, broken, failed (the store did not answer)."},
		[]string{"result"})}
	for _, r := range []string{walkPassed, walkBroken, walkFailed} {
		m.walks.WithLabelValues(r)
	}
	if reg != nil {
		if err := reg.Register(m.walks); err != nil {
			return nil, fmt.Errorf("%w: metrics: %w", ErrInvalid, err)
		}
	}
	return m, nil
}

// watch registers the gauges read from c's state.
func (m *auditMetrics) watch(c *versioning.AuditChecker) error {
	if m.reg == nil {
		return nil
	}
	ok := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "governor_ui_audit_chain_ok",
		Help: "0 once a check of the audit hash chain found it broken, until a whole walk passes again; 1 otherwise."},
		func() float64 {
			if c.Status().Broken != nil {
				return 0
			}
			return 1
		})
	last := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "governor_ui_audit_whole_walk_passed_timestamp_seconds",
		Help: "When the last whole walk of the audit hash chain that passed ended (Unix seconds; 0: none since start)."},
		func() float64 {
			at := c.Status().WholeAt
			if at.IsZero() {
				return 0
			}
			return float64(at.UnixNano()) / 1e9
		})
	for _, g := range []prometheus.Collector{ok, last} {
		if err := m.reg.Register(g); err != nil {
			return fmt.Errorf("%w: metrics: %w", ErrInvalid, err)
		}
	}
	return nil
}

// observe counts and logs one whole walk: a broken chain at ERROR, naming
// the entry; a store that did not answer at WARN.
func (m *auditMetrics) observe(log *slog.Logger, w versioning.AuditWalk) {
	var ce *versioning.ChainError
	switch {
	case w.Err == nil:
		m.walks.WithLabelValues(walkPassed).Inc()
		log.Debug("audit chain verified", "entries", w.Entries, "head", w.Head, "background", w.Background, "took", w.End.Sub(w.Start))
	case errors.As(w.Err, &ce):
		m.walks.WithLabelValues(walkBroken).Inc()
		log.Error("audit chain broken", "seq", ce.Seq, "problem", ce.Problem, "background", w.Background)
	case errors.Is(w.Err, versioning.ErrTampered):
		m.walks.WithLabelValues(walkBroken).Inc()
		log.Error("audit chain broken", "err", w.Err, "background", w.Background)
	default:
		m.walks.WithLabelValues(walkFailed).Inc()
		log.Warn("audit chain not verified: the store did not answer", "err", w.Err, "background", w.Background)
	}
}
