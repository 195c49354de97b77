package leader

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metric names every replica serves, leading or not, so that a Prometheus
// outside the engine can tell when no replica leads: an engine without a
// leader evaluates no alert rule, so it cannot page about that itself.
const (
	// LeaderMetric is 1 on the replica that leads, 0 on the others.
	LeaderMetric = "governor_engine_leader"
	// LastTickMetric is the newest tick claimed by any replica (Unix
	// seconds), as this replica last read it from the database: a standby
	// at each campaign attempt (every RetryInterval), the leader at each
	// claim. 0 until read. The age of its maximum over the replicas is how
	// long no replica has evaluated.
	LastTickMetric = "governor_engine_leader_last_tick_timestamp_seconds"
	// TickIntervalMetric is the interval between ticks (seconds) RunTicks
	// runs with; 0 until RunTicks starts.
	TickIntervalMetric = "governor_engine_tick_interval_seconds"
)

// tickMetrics are the series every replica serves. The zero value (no
// registerer) records nothing.
type tickMetrics struct {
	lastTick prometheus.Gauge
	interval prometheus.Gauge
}

func newTickMetrics(f promauto.Factory) tickMetrics {
	return tickMetrics{
		lastTick: f.NewGauge(prometheus.GaugeOpts{Name: LastTickMetric,
			Help: "Newest tick claimed by any replica (Unix seconds), as this replica last read it from the database; 0 until read."}),
		interval: f.NewGauge(prometheus.GaugeOpts{Name: TickIntervalMetric,
			Help: "Interval between evaluation ticks (seconds); 0 until the ticks start."}),
	}
}

// saw records tick as the newest claimed.
func (m tickMetrics) saw(tick time.Time) {
	if m.lastTick != nil && !tick.IsZero() {
		m.lastTick.Set(float64(tick.UnixNano()) / 1e9)
	}
}

func (m tickMetrics) setInterval(d time.Duration) {
	if m.interval != nil {
		m.interval.Set(d.Seconds())
	}
}

// intervalReporter is an elector that serves the tick interval RunTicks
// runs with (TickIntervalMetric).
type intervalReporter interface{ setTickInterval(time.Duration) }
