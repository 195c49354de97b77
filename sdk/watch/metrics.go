package watch

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics of one watcher. Every series carries the constant label service.
type metrics struct {
	messages *prometheus.CounterVec // result: applied, rejected, ignored
	rejected *prometheus.CounterVec // reason: see Reason
	cacheErr *prometheus.CounterVec // op: load, save
	rewatch  prometheus.Counter
	running  prometheus.Gauge
	// errors counts failures that are not NACKs, by op: watch, resync,
	// publish.
	errors *prometheus.CounterVec
	// established is 1 while the watch is established.
	established prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer, service string) (*metrics, error) {
	labels := prometheus.Labels{"service": service}
	m := &metrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "governor_sdk_watch_messages_total", ConstLabels: labels,
			Help: "Rule versions received from the control plane, by result: applied, rejected (NACKed), ignored (older than the running version).",
		}, []string{"result"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "governor_sdk_watch_rejected_total", ConstLabels: labels,
			Help: "Rule versions refused, by reason: not_json, oversized, checksum, wrong_service, invalid, apply.",
		}, []string{"reason"}),
		cacheErr: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "governor_sdk_watch_cache_errors_total", ConstLabels: labels,
			Help: "Failures to load or save the last-known-good rules cache, by op.",
		}, []string{"op"}),
		rewatch: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "governor_sdk_watch_rewatches_total", ConstLabels: labels,
			Help: "Times the watcher re-established its watch after a reconnect or an error.",
		}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "governor_sdk_watch_running_version", ConstLabels: labels,
			Help: "Rule version the watcher last applied (0 = none).",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "governor_sdk_watch_errors_total", ConstLabels: labels,
			Help: "Failures to establish the watch (op=watch), of the periodic resync (resync) and to publish a report or heartbeat (publish).",
		}, []string{"op"}),
		established: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "governor_sdk_watch_established", ConstLabels: labels,
			Help: "1 while the watch of the service's keys is established, 0 otherwise.",
		}),
	}
	for _, r := range []string{"applied", "rejected", "ignored"} {
		m.messages.WithLabelValues(r)
	}
	for _, r := range []Reason{ReasonNotJSON, ReasonOversized, ReasonChecksum, ReasonWrongService, ReasonInvalid, ReasonApply} {
		m.rejected.WithLabelValues(string(r))
	}
	m.cacheErr.WithLabelValues("load")
	m.cacheErr.WithLabelValues("save")
	for _, op := range []string{"watch", "resync", "publish"} {
		m.errors.WithLabelValues(op)
	}
	if reg == nil {
		return m, nil
	}
	// A series that cannot be registered fails New with its name; the ones
	// registered before it are taken back, so that New can be called again.
	all := []struct {
		name string
		c    prometheus.Collector
	}{
		{"governor_sdk_watch_messages_total", m.messages},
		{"governor_sdk_watch_rejected_total", m.rejected},
		{"governor_sdk_watch_cache_errors_total", m.cacheErr},
		{"governor_sdk_watch_rewatches_total", m.rewatch},
		{"governor_sdk_watch_running_version", m.running},
		{"governor_sdk_watch_errors_total", m.errors},
		{"governor_sdk_watch_established", m.established},
	}
	for i, s := range all {
		if err := reg.Register(s.c); err != nil {
			for _, done := range all[:i] {
				reg.Unregister(done.c)
			}
			return nil, fmt.Errorf("%s of service %q: %w", s.name, service, err)
		}
	}
	return m, nil
}
