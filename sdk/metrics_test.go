package governor_test

import (
	"context"
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
