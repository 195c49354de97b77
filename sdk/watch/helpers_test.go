package watch

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/sdk/rules"
)

// fakeApplier records what was applied and can refuse versions.
type fakeApplier struct {
	mu      sync.Mutex
	applied []int64
	tried   []int64 // every call, refused or not
	current *rules.Ruleset
	refuse  map[int64]bool
	// refuseSum refuses a content (checksum) whatever its version.
	refuseSum map[string]bool
	sums      []string // checksum of every ruleset accepted, in order
}

func (f *fakeApplier) Apply(rs *rules.Ruleset, version int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tried = append(f.tried, version)
	sum, err := rs.Checksum()
	if err != nil {
		return err
	}
	if f.refuse[version] || f.refuseSum[sum] {
		return errors.New("governor: route limits conflict")
	}
	f.applied = append(f.applied, version)
	f.sums = append(f.sums, sum)
	f.current = rs
	return nil
}

func (f *fakeApplier) versions() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.applied...)
}

// checksums returns the checksum of every ruleset accepted, in order.
func (f *fakeApplier) checksums() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.sums...)
}

func (f *fakeApplier) attempts() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.tried...)
}

func ruleset(service string, rate float64) *rules.Ruleset {
	return &rules.Ruleset{Service: service, Routes: []rules.Route{{
		Name: "api", Match: rules.Match{PathPrefix: "/"}, RateLimit: &rules.RateLimit{Rate: rate},
	}}}
}

func envelopeBytes(t testing.TB, service string, version int64) []byte {
	t.Helper()
	env, err := rules.NewEnvelope(version, ruleset(service, float64(version+1)))
	if err != nil {
		t.Fatal(err)
	}
	return mustJSON(t, env)
}

// newTestState returns a state with its reports collected.
func newTestState(t testing.TB, service, instance string, labels map[string]string) (*state, *fakeApplier, *[]*Report, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg, service)
	if err != nil {
		t.Fatal(err)
	}
	app := &fakeApplier{refuse: map[int64]bool{}}
	var reports []*Report
	s := &state{service: service, instance: instance, labels: labels, maxBytes: MaxCanaryBytes,
		applier: app, now: func() time.Time { return time.Unix(1, 0) },
		send: func(r *Report) { reports = append(reports, r) }, onError: func(error) {}, m: m}
	return s, app, &reports, reg
}

// counter reads one series of a gathered counter (0 when absent).
func counter(t testing.TB, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// gauge reads a gathered gauge of one series (-1 when absent).
func gauge(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// reportsOf subscribes c to subject and returns the reports that arrive on
// it, decoded (undecodable ones dropped); the subscription ends with the
// test.
func reportsOf(t *testing.T, c *nats.Conn, subject string) <-chan *Report {
	t.Helper()
	reports := make(chan *Report, 16)
	sub, err := c.Subscribe(subject, func(m *nats.Msg) {
		if r, err := DecodeReport(m.Data); err == nil {
			reports <- r
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return reports
}
