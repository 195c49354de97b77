package manager

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/dispatch"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/notify/pagerduty"
	"governor.dev/governor/alerts/notify/webhook"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/alerts/store"
	"governor.dev/governor/sdk/clock"
)

// Monday 2026-03-02 10:00 UTC, inside business hours.
var t0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

// receiver is a real HTTP receiver recording what it gets.
type receiver struct {
	t    testing.TB
	srv  *httptest.Server
	mu   sync.Mutex
	got  []json.RawMessage
	fail bool
	// refuse, if set, says which requests are answered 400 Bad Request
	// (and not recorded).
	refuse func(raw json.RawMessage) bool
	// held, while set, holds every request until it is closed (hold).
	held chan struct{}
}

func newReceiver(t testing.TB) *receiver {
	r := &receiver{t: t}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var raw json.RawMessage
		if err := json.NewDecoder(req.Body).Decode(&raw); err != nil {
			t.Error(err)
		}
		r.mu.Lock()
		held := r.held
		r.mu.Unlock()
		if held != nil {
			select {
			case <-held:
			case <-req.Context().Done():
				return
			}
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.fail {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		if r.refuse != nil && r.refuse(raw) {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.got = append(r.got, raw)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// hold makes the receiver slow: every request waits until release is
// called (at the latest when the test ends), then is answered.
func (r *receiver) hold() (release func()) {
	ch := make(chan struct{})
	r.mu.Lock()
	r.held = ch
	r.mu.Unlock()
	var once sync.Once
	release = func() {
		once.Do(func() {
			r.mu.Lock()
			r.held = nil
			r.mu.Unlock()
			close(ch)
		})
	}
	r.t.Cleanup(release)
	return release
}

// take returns and forgets what arrived.
func (r *receiver) take() []json.RawMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.got
	r.got = nil
	return out
}

// webhooks decodes the webhook payloads that arrived into one line each:
// "status alertname/status,alertname/status" sorted.
func (r *receiver) webhooks(t testing.TB) []string {
	var out []string
	for _, raw := range r.take() {
		var p webhook.Payload
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		if p.Version != "4" {
			t.Fatalf("payload version %q", p.Version)
		}
		var as []string
		for _, a := range p.Alerts {
			as = append(as, a.Labels["alertname"]+"@"+a.Labels["service"]+"/"+a.Status)
		}
		sort.Strings(as)
		out = append(out, p.Status+" "+strings.Join(as, ","))
	}
	sort.Strings(out)
	return out
}

// metricsDB is a scripted metrics source: the series each expression returns.
type metricsDB struct {
	mu     sync.Mutex
	series map[string][]rule.Sample
}

func (d *metricsDB) set(expr string, services ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var s []rule.Sample
	for _, svc := range services {
		s = append(s, rule.Sample{Labels: map[string]string{"service": svc}, Value: 1})
	}
	d.series[expr] = s
}

func (d *metricsDB) query(_ context.Context, q string, _ time.Time) ([]rule.Sample, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.series[q], nil
}

var testRules = []rule.Rule{
	{Name: "Shed", Expr: "shed", Severity: alerts.P0, For: time.Minute, Annotations: map[string]string{"summary": "{{ $labels.service }} sheds critical"}},
	{Name: "Load", Expr: "load", Severity: alerts.P1},
	{Name: "Breaker", Expr: "breaker", Severity: alerts.P2},
}

type harness struct {
	t     testing.TB
	clk   *clock.Fake
	db    *metricsDB
	hook  *receiver
	pd    *receiver
	st    store.Store
	m     *Manager
	reg   *prometheus.Registry
	path  string
	pgURL string
	start time.Time
	// retention is Options.Retention (0: default).
	retention time.Duration
	// silenceRetention is Options.SilenceRetention (0: default).
	silenceRetention time.Duration
	// routes, if set, replace the default routes at the next open.
	routes []dispatch.Route
	// rules, if set, replace testRules at the next open.
	rules []rule.Rule
	// capacity is Options.Queue.Capacity at the next open (0: default).
	capacity int
	// timeout is Options.Queue.Timeout at the next open (0: default).
	timeout time.Duration
	// withoutPD leaves the pd receiver out at the next open (routes must
	// not name it).
	withoutPD bool
	// wrap, if set, wraps the store the manager uses at the next open.
	wrap func(store.Store) store.Store
}

func newHarness(t testing.TB) *harness { return newHarnessOn(t, "") }

// newHarnessOn uses PostgreSQL at pgURL, or a fresh SQLite file when empty.
func newHarnessOn(t testing.TB, pgURL string) *harness {
	h := &harness{t: t, clk: clock.NewFake(t0), db: &metricsDB{series: map[string][]rule.Sample{}},
		hook: newReceiver(t), pd: newReceiver(t), path: filepath.Join(t.TempDir(), "alerts.db"), pgURL: pgURL, start: t0}
	h.open()
	t.Cleanup(func() { h.close() })
	return h
}

func (h *harness) open() {
	var st store.Store
	var err error
	if h.pgURL != "" {
		st, err = store.OpenPostgres(context.Background(), h.pgURL, store.Options{})
	} else {
		st, err = store.OpenSQLite(context.Background(), h.path, store.Options{})
	}
	if err != nil {
		h.t.Fatal(err)
	}
	h.st = st
	h.reg = prometheus.NewRegistry()
	hook, err := webhook.New(webhook.Config{URL: h.hook.srv.URL}, h.hook.srv.Client())
	if err != nil {
		h.t.Fatal(err)
	}
	pd, err := pagerduty.New(pagerduty.Config{RoutingKey: "rk", URL: h.pd.srv.URL}, h.pd.srv.Client())
	if err != nil {
		h.t.Fatal(err)
	}
	routes := h.routes
	if routes == nil {
		routes = []dispatch.Route{
			{Receiver: "pd", Severities: []alerts.Severity{alerts.P0}, Continue: true},
			{Receiver: "hook"},
		}
	}
	rules := h.rules
	if rules == nil {
		rules = testRules
	}
	receivers := map[string]notify.Notifier{"hook": hook, "pd": pd}
	if h.withoutPD {
		delete(receivers, "pd")
	}
	if h.wrap != nil {
		st = h.wrap(st)
	}
	h.m, err = New(context.Background(), Options{
		Rules: rules, Query: h.db.query, Store: st, Clock: h.clk, Registerer: h.reg,
		Receivers: receivers,
		Routes:    routes,
		Timing:    dispatch.Timing{GroupWait: 30 * time.Second, GroupInterval: time.Minute},
		Queue:     notify.QueueOptions{Capacity: h.capacity, InitialBackoff: time.Second, MaxAttempts: 3, Timeout: h.timeout},
		Retention: h.retention, SilenceRetention: h.silenceRetention,
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) close() {
	if h.m != nil {
		_ = h.m.Close()
		_ = h.st.Close()
		h.m = nil
	}
}

// at moves the clock to t0+d, steps and waits for the deliveries.
func (h *harness) at(d time.Duration) {
	h.t.Helper()
	h.clk.Set(h.start.Add(d))
	if err := h.m.Step(context.Background(), h.clk.Now()); err != nil {
		h.t.Fatalf("step at %s: %v", d, err)
	}
	if err := h.m.Idle(context.Background()); err != nil {
		h.t.Fatal(err)
	}
}

// expect checks the webhook payloads that arrived since the last check.
func (h *harness) expect(d time.Duration, want ...string) {
	h.t.Helper()
	got := h.hook.webhooks(h.t)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		h.t.Fatalf("at %s: webhook got\n  %s\nwant\n  %s", d, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// timeline steps every 30s from from to to (inclusive), expecting each
// listed notification at its time and nothing in between.
func (h *harness) timeline(from, to time.Duration, want map[time.Duration][]string) {
	h.t.Helper()
	for d := from; d <= to; d += 30 * time.Second {
		h.at(d)
		h.expect(d, want[d]...)
	}
}

func (h *harness) pdActions() []string {
	var out []string
	for _, raw := range h.pd.take() {
		var e pagerduty.Event
		if err := json.Unmarshal(raw, &e); err != nil {
			h.t.Fatal(err)
		}
		out = append(out, e.EventAction)
	}
	sort.Strings(out)
	return out
}
