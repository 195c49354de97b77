package signalstest

import (
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"governor.dev/governor/sdk/clock"
)

// Class is the offered load of one traffic class.
type Class struct {
	// Rate is offered requests per second.
	Rate float64
	// Shed is the fraction of offered requests refused (outcome "shed").
	Shed float64
}

// Profile describes the steady state a Service exposes.
type Profile struct {
	Service string
	// Routes each carry the whole Classes load (so totals scale with the
	// number of routes). Default: one route, "/api".
	Routes  []string
	Classes map[string]Class
	// ErrorFraction is errors per admitted request.
	ErrorFraction float64
	// Latency maps histogram upper bounds (seconds) to the cumulative
	// fraction of admitted requests at or below them.
	Latency map[float64]float64
	// QueueDelay is the same for the queueing delay.
	QueueDelay     map[float64]float64
	InFlight       float64
	Limit          float64
	CPUCores       float64
	MemoryBytes    float64
	RulesVersion   float64
	ProcessLabeled bool // give process_* series the service label too
}

// DefaultProfile returns a profile with two classes and simple histograms.
// Its expected signals, by hand: offered 1000/s, admitted 850/s, shed ratio
// 150/1000 = 0.15 (batch 0.25, critical 0), error ratio 0.02; latency p50 in
// (0.05, 0.1] at rank 0.5: 0.05 + 0.05 × (0.5−0.4)/(0.8−0.4) = 0.0625; p99 in
// (0.25, 0.5]: 0.25 + 0.25 × (0.99−0.95)/(1−0.95) = 0.45; queue p99 in
// (0.001, 0.01]: 0.001 + 0.009 × (0.99−0.9)/(1−0.9) = 0.0091.
func DefaultProfile(service string) Profile {
	return Profile{
		Service: service,
		Routes:  []string{"/api"},
		Classes: map[string]Class{
			"critical": {Rate: 400, Shed: 0},
			"batch":    {Rate: 600, Shed: 0.25},
		},
		ErrorFraction: 0.02,
		Latency:       map[float64]float64{0.05: 0.4, 0.1: 0.8, 0.25: 0.95, 0.5: 1},
		QueueDelay:    map[float64]float64{0.001: 0.9, 0.01: 1},
		InFlight:      12,
		Limit:         40,
		CPUCores:      0.5,
		MemoryBytes:   256 << 20,
		RulesVersion:  3,
	}
}

func (p Profile) routes() []string {
	if len(p.Routes) == 0 {
		return []string{"/api"}
	}
	return p.Routes
}

// Offered returns the total offered rate over all routes.
func (p Profile) Offered() float64 {
	var r float64
	for _, c := range p.Classes {
		r += c.Rate
	}
	return r * float64(len(p.routes()))
}

// Admitted returns the total admitted rate over all routes.
func (p Profile) Admitted() float64 {
	var r float64
	for _, c := range p.Classes {
		r += c.Rate * (1 - c.Shed)
	}
	return r * float64(len(p.routes()))
}

// Service is an HTTP handler serving the SDK's metrics for a Profile. Its
// counters are rate × (now − start), so rate() over any window is exact;
// histogram buckets are whole counts, so keep rates high (hundreds per
// second) for quantiles to be exact within a fraction of a percent.
type Service struct {
	clk   clock.Clock
	start time.Time

	mu      sync.Mutex
	profile Profile
	down    bool
	reg     *prometheus.Registry
	handler http.Handler
}

// NewService starts a service at clk's current time (clock.Real if nil).
func NewService(p Profile, clk clock.Clock) *Service {
	if clk == nil {
		clk = clock.Real{}
	}
	s := &Service{clk: clk, start: clk.Now(), profile: p, reg: prometheus.NewRegistry()}
	s.reg.MustRegister(collector{s})
	s.handler = promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})
	return s
}

// SetDown makes the handler answer 503 (true) or serve again (false).
func (s *Service) SetDown(down bool) {
	s.mu.Lock()
	s.down = down
	s.mu.Unlock()
}

// ServeHTTP serves /metrics.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	down := s.down
	s.mu.Unlock()
	if down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	s.handler.ServeHTTP(w, r)
}

// Profile returns the profile served.
func (s *Service) Profile() Profile {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.profile
}

type collector struct{ s *Service }

var (
	descRequests = prometheus.NewDesc("governor_sdk_requests_total", "Inbound requests by decision.", []string{"service", "route", "class", "outcome"}, nil)
	descErrors   = prometheus.NewDesc("governor_sdk_request_errors_total", "Admitted requests that ended in an error.", []string{"service", "route", "class"}, nil)
	descDuration = prometheus.NewDesc("governor_sdk_request_duration_seconds", "Latency of admitted requests.", []string{"service", "route"}, nil)
	descQueue    = prometheus.NewDesc("governor_sdk_queue_delay_seconds", "Time spent queued before admission.", []string{"service", "route"}, nil)
	descInflight = prometheus.NewDesc("governor_sdk_inflight", "Requests in progress.", []string{"service", "route"}, nil)
	descLimit    = prometheus.NewDesc("governor_sdk_limit", "Current concurrency limit.", []string{"service", "route"}, nil)
	descVersion  = prometheus.NewDesc("governor_sdk_rules_version", "Version of the ruleset in force.", []string{"service"}, nil)
)

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRequests, descErrors, descDuration, descQueue, descInflight, descLimit, descVersion} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	s.mu.Lock()
	p := s.profile
	s.mu.Unlock()
	el := s.clk.Now().Sub(s.start).Seconds()
	svc := p.Service
	for _, route := range p.routes() {
		var admitted float64
		for _, name := range slices.Sorted(maps.Keys(p.Classes)) {
			cl := p.Classes[name]
			adm := cl.Rate * (1 - cl.Shed) * el
			admitted += adm
			ch <- prometheus.MustNewConstMetric(descRequests, prometheus.CounterValue, adm, svc, route, name, "admitted")
			ch <- prometheus.MustNewConstMetric(descRequests, prometheus.CounterValue, cl.Rate*cl.Shed*el, svc, route, name, "shed")
			ch <- prometheus.MustNewConstMetric(descErrors, prometheus.CounterValue, adm*p.ErrorFraction, svc, route, name)
		}
		ch <- histogram(descDuration, p.Latency, admitted, svc, route)
		ch <- histogram(descQueue, p.QueueDelay, admitted, svc, route)
		ch <- prometheus.MustNewConstMetric(descInflight, prometheus.GaugeValue, p.InFlight, svc, route)
		ch <- prometheus.MustNewConstMetric(descLimit, prometheus.GaugeValue, p.Limit, svc, route)
	}
	ch <- prometheus.MustNewConstMetric(descVersion, prometheus.GaugeValue, p.RulesVersion, svc)
	var names, values []string
	if p.ProcessLabeled {
		names, values = []string{"service"}, []string{svc}
	}
	ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("process_cpu_seconds_total", "CPU seconds.", names, nil), prometheus.CounterValue, p.CPUCores*el, values...)
	ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("process_resident_memory_bytes", "Resident memory.", names, nil), prometheus.GaugeValue, p.MemoryBytes, values...)
}

func histogram(d *prometheus.Desc, cum map[float64]float64, count float64, lv ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(cum))
	var sum float64
	prev := 0.0
	for _, ub := range slices.Sorted(maps.Keys(cum)) {
		buckets[ub] = uint64(cum[ub] * count)
		sum += (cum[ub] - prev) * count * ub / 2
		prev = cum[ub]
	}
	return prometheus.MustNewConstHistogram(d, uint64(count), sum, buckets, lv...)
}
