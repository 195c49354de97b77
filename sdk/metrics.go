package governor

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/sdk/shed"
)

// metrics are the Governor's inbound series (docs/metrics.md). Per-request
// counts live in the routes' sharded cells and are summed at scrape time by
// the collector, so the hot path touches no shared Prometheus series.
type metrics struct {
	version  prometheus.Gauge
	applied  prometheus.Counter
	rejected prometheus.Counter
}

// newMetrics registers the Governor's series on reg. A series that cannot
// be registered (one already there: another Governor for the same service,
// or a metric of the same name with other labels or help) is an error
// naming it, wrapping the Registerer's error (a
// prometheus.AlreadyRegisteredError for the same series); New then takes
// back what was registered before it.
func newMetrics(g *Governor, reg prometheus.Registerer) (*metrics, error) {
	reg = prometheus.WrapRegistererWith(prometheus.Labels{"service": g.opts.Service}, reg)
	if err := reg.Register(newCollector(g)); err != nil {
		return nil, registerError("governor_sdk_requests_total and the other per-route series", g.opts.Service, err)
	}
	applied := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "governor_sdk_rules_applied_total",
		Help: "Rule updates by result: applied or rejected.",
	}, []string{"result"})
	version := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "governor_sdk_rules_version",
		Help: "Version of the ruleset in force (0 = built-in defaults).",
	})
	for _, m := range []struct {
		name string
		c    prometheus.Collector
	}{
		{"governor_sdk_rules_applied_total", applied},
		{"governor_sdk_rules_version", version},
	} {
		if err := reg.Register(m.c); err != nil {
			return nil, registerError(m.name, g.opts.Service, err)
		}
	}
	return &metrics{
		version:  version,
		applied:  applied.WithLabelValues("applied"),
		rejected: applied.WithLabelValues("rejected"),
	}, nil
}

// registerError names the series that could not be registered.
func registerError(what, service string, err error) error {
	if are := (prometheus.AlreadyRegisteredError{}); errors.As(err, &are) {
		return fmt.Errorf("%s of service %q: already registered (by another Governor for the service?): %w", what, service, err)
	}
	return fmt.Errorf("%s of service %q: %w", what, service, err)
}

// collector exports the routes' sharded counts.
type collector struct {
	g                                           *Governor
	requests, errors, duration, inflight, limit *prometheus.Desc
	queueDelay, capped                          *prometheus.Desc
	overloadLevel, schedLatency                 *prometheus.Desc
	durationBounds, queueBounds                 []float64
}

func newCollector(g *Governor) *collector {
	c := &collector{
		g: g,
		requests: prometheus.NewDesc("governor_sdk_requests_total",
			"Inbound requests by route, class and decision.", []string{"route", "class", "outcome"}, nil),
		errors: prometheus.NewDesc("governor_sdk_request_errors_total",
			"Admitted requests that ended in an error (HTTP 5xx).", []string{"route", "class"}, nil),
		duration: prometheus.NewDesc("governor_sdk_request_duration_seconds",
			"Latency of admitted requests.", []string{"route"}, nil),
		capped: prometheus.NewDesc("governor_sdk_priority_capped_total",
			"Requests whose claimed class the priority trust lowered, by the class they were given.", []string{"route", "class"}, nil),
		inflight: prometheus.NewDesc("governor_sdk_inflight",
			"Requests in progress.", []string{"route"}, nil),
		limit: prometheus.NewDesc("governor_sdk_limit",
			"Current concurrency limit (after the warm-up ramp).", []string{"route"}, nil),
		queueDelay: prometheus.NewDesc("governor_sdk_queue_delay_seconds",
			"Time spent queued before admission.", []string{"route"}, nil),
		overloadLevel: prometheus.NewDesc("governor_sdk_overload_level",
			"Classes the overload throttle sheds: 0 none, 1 all of batch, 1.5 batch and half of browse, up to 3 (4 when critical may be shed).", nil, nil),
		schedLatency: prometheus.NewDesc("governor_sdk_sched_latency_seconds",
			"Mean scheduling latency (runnable goroutines waiting for a CPU) over the overload throttle's last window.", nil, nil),
	}
	for _, b := range durationBounds {
		c.durationBounds = append(c.durationBounds, b.Seconds())
	}
	for _, b := range queueBounds {
		c.queueBounds = append(c.queueBounds, b.Seconds())
	}
	return c
}

// Describe sends the fixed descriptors.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.requests, c.errors, c.capped, c.duration, c.inflight, c.limit, c.queueDelay, c.overloadLevel, c.schedLatency} {
		ch <- d
	}
}

// Collect sums every route's shards.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	if c.g.throttle != nil {
		level, lat := c.g.OverloadLevel()
		ch <- prometheus.MustNewConstMetric(c.overloadLevel, prometheus.GaugeValue, level)
		ch <- prometheus.MustNewConstMetric(c.schedLatency, prometheus.GaugeValue, lat.Seconds())
	}
	st := c.g.state.Load()
	trusts := st.classifier.Trusts()
	for _, rt := range st.routes {
		cl := rt.cell
		var counts [shed.NumClasses][numOutcomes]uint64
		var errs, capped [shed.NumClasses]uint64
		var buckets [len(durationBounds) + 1]uint64
		var sum int64
		var inflight int64
		for i := range cl.shards {
			s := &cl.shards[i]
			inflight += s.inflight.Load()
			for k := range counts {
				for o := range counts[k] {
					counts[k][o] += s.counts[o][k].Load()
				}
				errs[k] += s.errors[k].Load()
				capped[k] += s.capped[k].Load()
			}
			s.duration.read(&buckets, &sum)
		}
		for k := range counts {
			class := string(rules.Classes[k])
			for o := range counts[k] {
				ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, float64(counts[k][o]), rt.name, class, outcomeNames[o])
			}
			ch <- prometheus.MustNewConstMetric(c.errors, prometheus.CounterValue, float64(errs[k]), rt.name, class)
			if trusts {
				ch <- prometheus.MustNewConstMetric(c.capped, prometheus.CounterValue, float64(capped[k]), rt.name, class)
			}
		}
		ch <- constHistogram(c.duration, c.durationBounds, buckets[:], sum, rt.name)
		ch <- prometheus.MustNewConstMetric(c.inflight, prometheus.GaugeValue, float64(inflight), rt.name)
		if rt.conc != nil {
			l := rt.effectiveLimit(c.g.clk.Nanotime())
			ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(l), rt.name)
		}
		if rt.queue != nil {
			var qb [len(queueBounds) + 1]uint64
			for b := range qb {
				qb[b] = cl.queueDelay.buckets[b].Load()
			}
			ch <- constHistogram(c.queueDelay, c.queueBounds, qb[:], cl.queueDelay.sum.Load(), rt.name)
		}
	}
}

// constHistogram turns per-bucket counts (last = +Inf) into a Prometheus
// histogram with cumulative buckets.
func constHistogram(d *prometheus.Desc, bounds []float64, counts []uint64, sumNs int64, label string) prometheus.Metric {
	cum := make(map[float64]uint64, len(bounds))
	var total uint64
	for i, b := range bounds {
		total += counts[i]
		cum[b] = total
	}
	total += counts[len(bounds)]
	return prometheus.MustNewConstHistogram(d, total, float64(sumNs)/1e9, cum, label)
}
