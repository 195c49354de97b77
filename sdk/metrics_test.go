package governor_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

type families map[string]*dto.MetricFamily

func gather(t *testing.T, reg *prometheus.Registry) families {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	m := families{}
	for _, mf := range mfs {
		m[mf.GetName()] = mf
	}
	return m
}

// metric returns the series of name whose labels include want, or nil.
func (m families) metric(name string, want map[string]string) *dto.Metric {
	mf := m[name]
	if mf == nil {
		return nil
	}
next:
	for _, s := range mf.GetMetric() {
		have := map[string]string{}
		for _, l := range s.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return s
	}
	return nil
}

func (m families) value(name string, want map[string]string) float64 {
	s := m.metric(name, want)
	switch {
	case s == nil:
		return -1
	case s.Counter != nil:
		return s.GetCounter().GetValue()
	case s.Gauge != nil:
		return s.GetGauge().GetValue()
	}
	return -1
}

func TestMetricsFollowTheContract(t *testing.T) {
	reg := prometheus.NewRegistry()
	lims := &limiters{}
	opts := governor.DefaultOptions("shop")
	opts.Clock = clock.NewFake(fakeStart)
	opts.Registerer = reg
	opts.NewLimiter = lims.factory
	opts.Shards = 4
	g, err := governor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	r := concRoute(2, 0)
	r.RateLimit = &rules.RateLimit{Rate: 1, Burst: 4}
	shadow := route("shadow", "/s")
	shadow.Mode = rules.ModeShadow
	shadow.Concurrency = &rules.Concurrency{Algorithm: rules.AlgorithmFixed, Max: 1}
	rs := ruleset(r, shadow)
	rs.Service = "shop"
	if err := g.Apply(rs, 1); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p1, _ := g.Admit(ctx, governor.Request{Path: "/", Priority: "core"})
	p2, _ := g.Admit(ctx, governor.Request{Path: "/", Priority: "critical"})
	g.Admit(ctx, governor.Request{Path: "/", Priority: "core"}) // shed
	g.Admit(ctx, governor.Request{Path: "/", Priority: "core"}) // shed
	g.Admit(ctx, governor.Request{Path: "/", Priority: "core"}) // rate limited
	p1.Release(30*time.Millisecond, governor.Success)
	s1, _ := g.Admit(ctx, governor.Request{Path: "/s"})
	s2, _ := g.Admit(ctx, governor.Request{Path: "/s"}) // would shed
	s1.Release(time.Millisecond, governor.Success)
	s2.Release(time.Millisecond, governor.Failure)

	m := gather(t, reg)
	counts := []struct {
		route, class, outcome string
		want                  float64
	}{
		{"api", "core", "admitted", 1},
		{"api", "critical", "admitted", 1},
		{"api", "core", "shed", 2},
		{"api", "core", "rate_limited", 1},
		{"api", "batch", "admitted", 0},
		{"shadow", "core", "admitted", 2},
		{"shadow", "core", "shadow_would_shed", 1},
	}
	for _, c := range counts {
		got := m.value("governor_sdk_requests_total", map[string]string{"service": "shop", "route": c.route, "class": c.class, "outcome": c.outcome})
		if got != c.want {
			t.Errorf("requests_total{route=%s,class=%s,outcome=%s} = %v, want %v", c.route, c.class, c.outcome, got, c.want)
		}
	}
	if got := len(m["governor_sdk_requests_total"].GetMetric()); got != 2*4*9 {
		t.Errorf("%d requests_total series, want every route x class x outcome up front (72)", got)
	}
	if v := m.value("governor_sdk_request_errors_total", map[string]string{"route": "shadow", "class": "core"}); v != 1 {
		t.Errorf("errors %v, want 1", v)
	}
	if v := m.value("governor_sdk_inflight", map[string]string{"route": "api"}); v != 1 {
		t.Errorf("inflight %v, want 1", v)
	}
	if v := m.value("governor_sdk_limit", map[string]string{"route": "api"}); v != 2 {
		t.Errorf("limit %v, want 2", v)
	}
	h := m.metric("governor_sdk_request_duration_seconds", map[string]string{"route": "api"}).GetHistogram()
	if h.GetSampleCount() != 1 || h.GetSampleSum() != 0.03 {
		t.Errorf("duration histogram count %d sum %v, want 1 and 0.03", h.GetSampleCount(), h.GetSampleSum())
	}
	for _, b := range h.GetBucket() {
		want := uint64(0)
		if b.GetUpperBound() >= 0.05 {
			want = 1
		}
		if b.GetCumulativeCount() != want {
			t.Errorf("bucket le=%v holds %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
	p2.Release(time.Millisecond, governor.Success)
}

// TestNewFailsNamingAMetricAlreadyRegistered: New returns an error naming a
// series it cannot register, and leaves none of its own registered. It
// panicked when the version gauge or the applied counter was taken (a
// library must not panic in New), and the error for another Governor of
// the same service did not say which series or why.
func TestNewFailsNamingAMetricAlreadyRegistered(t *testing.T) {
	svc := prometheus.Labels{"service": "svc"}
	tests := []struct {
		name     string
		taken    func(t *testing.T, reg *prometheus.Registry)
		mention  string
		alreadyR bool // the error wraps prometheus.AlreadyRegisteredError
	}{
		{"another Governor for the service", func(t *testing.T, reg *prometheus.Registry) {
			opts := governor.DefaultOptions("svc")
			opts.Registerer = reg
			g, err := governor.New(opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(g.Close) // still running: its series stay
		}, "governor_sdk_requests_total", true},
		{"version gauge with another help", func(t *testing.T, reg *prometheus.Registry) {
			reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "governor_sdk_rules_version", Help: "other", ConstLabels: svc}))
		}, "governor_sdk_rules_version", false},
		{"applied counter without its labels", func(t *testing.T, reg *prometheus.Registry) {
			reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "governor_sdk_rules_applied_total", Help: "other", ConstLabels: svc}))
		}, "governor_sdk_rules_applied_total", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			tt.taken(t, reg)
			before := gather(t, reg)
			opts := governor.DefaultOptions("svc")
			opts.Registerer = reg
			g, err := governor.New(opts)
			if err == nil {
				g.Close()
				t.Fatal("New succeeded with its series taken")
			}
			if !errors.Is(err, governor.ErrInvalidOptions) || !strings.Contains(err.Error(), tt.mention) {
				t.Fatalf("New: %v; want ErrInvalidOptions naming %s", err, tt.mention)
			}
			if are := (prometheus.AlreadyRegisteredError{}); errors.As(err, &are) != tt.alreadyR {
				t.Fatalf("New: %v; wraps AlreadyRegisteredError: %v, want %v", err, !tt.alreadyR, tt.alreadyR)
			}
			after := gather(t, reg)
			if len(after) != len(before) {
				t.Fatalf("%d metric families after the failed New, want the %d from before", len(after), len(before))
			}
			for name, mf := range before {
				if n := len(after[name].GetMetric()); n != len(mf.GetMetric()) {
					t.Fatalf("%s has %d series after the failed New, want %d", name, n, len(mf.GetMetric()))
				}
			}
		})
	}
}

// TestCloseUnregistersTheMetrics: a closed Governor reported its last
// counts forever, and a new Governor for the same service (a hot reload, a
// test restarting the service) could not be made on the same Registerer.
func TestCloseUnregistersTheMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := governor.DefaultOptions("svc")
	opts.Registerer = reg
	g, err := governor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if m := gather(t, reg); m["governor_sdk_rules_version"] == nil {
		t.Fatal("no series registered")
	}
	g.Close()
	if m := gather(t, reg); len(m) != 0 {
		t.Fatalf("series left after Close: %d families", len(m))
	}
	g, err = governor.New(opts)
	if err != nil {
		t.Fatalf("New after Close: %v", err)
	}
	defer g.Close()
	if m := gather(t, reg); m["governor_sdk_rules_version"] == nil {
		t.Fatal("the new Governor's series are missing")
	}
}
