package signals_test

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
	"governor.dev/governor/engine/signals/signalstest"
	"governor.dev/governor/sdk/clock"
)

// fleet is three synthetic SDK instances: checkout twice, search once.
type fleet struct {
	services []*signalstest.Service
	servers  []*httptest.Server
}

func (f *fleet) targets() []embedded.Target {
	var ts []embedded.Target
	for _, s := range f.servers {
		ts = append(ts, embedded.Target{URL: s.URL + "/metrics"})
	}
	return ts
}

func (f *fleet) hosts() []string {
	var hs []string
	for _, s := range f.servers {
		u, _ := url.Parse(s.URL)
		hs = append(hs, u.Host)
	}
	return hs
}

func startFleet(t *testing.T, clk clock.Clock) *fleet {
	c1 := signalstest.DefaultProfile("checkout")
	c2 := signalstest.DefaultProfile("checkout")
	c2.CPUCores, c2.InFlight, c2.MemoryBytes = 0.7, 20, 512<<20
	s := signalstest.DefaultProfile("search")
	s.Classes = map[string]signalstest.Class{"browse": {Rate: 300, Shed: 0.5}}
	s.ErrorFraction = 0.1
	s.ProcessLabeled = true
	f := &fleet{}
	for _, p := range []signalstest.Profile{c1, c2, s} {
		svc := signalstest.NewService(p, clk)
		srv := httptest.NewServer(svc)
		t.Cleanup(srv.Close)
		f.services = append(f.services, svc)
		f.servers = append(f.servers, srv)
	}
	return f
}

type expect struct {
	key  signals.Key
	sig  signals.Signal
	want float64
}

// expectations are the hand-computed signals of the fleet (see
// signalstest.DefaultProfile for the per-instance arithmetic).
func expectations(hosts []string) []expect {
	c1 := signals.Key{Service: "checkout", Instance: hosts[0]}
	c2 := signals.Key{Service: "checkout", Instance: hosts[1]}
	s1 := signals.Key{Service: "search", Instance: hosts[2]}
	co, se := signals.Key{Service: "checkout"}, signals.Key{Service: "search"}
	var out []expect
	add := func(k signals.Key, vals map[signals.Signal]float64) {
		for s, v := range vals {
			out = append(out, expect{k, s, v})
		}
	}
	checkout := map[signals.Signal]float64{
		signals.RequestRate: 1000, signals.ErrorRatio: 0.02, signals.ShedRatio: 0.15,
		signals.LatencyP50: 0.0625, signals.LatencyP99: 0.45, signals.QueueDelayP99: 0.0091,
		signals.InFlight: 12, signals.Limit: 40, signals.CPU: 0.5, signals.Memory: 256 << 20,
	}
	add(c1, checkout)
	c2v := map[signals.Signal]float64{}
	for k, v := range checkout {
		c2v[k] = v
	}
	c2v[signals.CPU], c2v[signals.InFlight], c2v[signals.Memory] = 0.7, 20, 512<<20
	add(c2, c2v)
	add(co, map[signals.Signal]float64{
		signals.RequestRate: 2000, signals.ErrorRatio: 0.02, signals.ShedRatio: 0.15,
		signals.LatencyP50: 0.0625, signals.LatencyP99: 0.45, signals.QueueDelayP99: 0.0091,
		signals.InFlight: 32, signals.Limit: 80, signals.CPU: 0.6, signals.Memory: 384 << 20,
	})
	search := map[signals.Signal]float64{
		signals.RequestRate: 300, signals.ErrorRatio: 0.1, signals.ShedRatio: 0.5,
		signals.LatencyP50: 0.0625, signals.LatencyP99: 0.45, signals.QueueDelayP99: 0.0091,
		signals.InFlight: 12, signals.Limit: 40, signals.CPU: 0.5, signals.Memory: 256 << 20,
	}
	add(s1, search)
	add(se, search)
	slices.SortFunc(out, func(a, b expect) int {
		return cmp.Or(a.key.Compare(b.key), cmp.Compare(a.sig, b.sig))
	})
	return out
}

// near compares with a relative tolerance (absolute for values near zero).
func near(want, got, rel float64) bool {
	return math.Abs(want-got) <= rel*math.Max(math.Abs(want), 1e-3)
}

func readBoth(t *testing.T, r *signals.Reader, at time.Time) map[signals.Key]*signals.Entry {
	t.Helper()
	all := map[signals.Key]*signals.Entry{}
	for _, scope := range []signals.Scope{signals.PerInstance, signals.PerService} {
		snap, err := r.Read(context.Background(), at, scope)
		require.NoError(t, err)
		require.Empty(t, snap.Errors)
		for k, e := range snap.Entries {
			all[k] = e
		}
	}
	return all
}

// The default templates on the embedded store give the hand-computed values
// for every signal, per instance and per service. Everything runs on a fake
// clock: five scrapes 15 s apart, then a read at the last one.
func TestDefaultSignalsOnEmbeddedStore(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fl := startFleet(t, clk)
	db, err := embedded.Open(embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	scrapes := make(chan embedded.TargetStatus, len(fl.servers))
	sc, err := embedded.NewScraper(db, embedded.ScraperOptions{Interval: 15 * time.Second, Clock: clk, OnScrape: func(st embedded.TargetStatus) { scrapes <- st }})
	require.NoError(t, err)
	require.NoError(t, sc.SetTargets(fl.targets()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- sc.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	round := func() {
		for range fl.servers {
			st := <-scrapes
			require.Equal(t, embedded.HealthUp, st.Health, st.LastError)
		}
	}
	round()
	for range 4 {
		clk.Advance(15 * time.Second)
		round()
	}
	r, err := signals.NewReader(db, signals.ReaderOptions{})
	require.NoError(t, err)
	got := readBoth(t, r, clk.Now())
	require.Len(t, got, 5)
	for _, e := range expectations(fl.hosts()) {
		v := got[e.key].Get(e.sig)
		require.True(t, v.Known(), "%s %s: %s", e.key, e.sig, v)
		require.True(t, near(e.want, v.V, 0.01), "%s %s: want %g, got %g", e.key, e.sig, e.want, v.V)
	}
	require.InDelta(t, 0.25, got[signals.Key{Service: "checkout"}].ShedByClass["batch"].V, 1e-9)
	require.InDelta(t, 0.0, got[signals.Key{Service: "checkout"}].ShedByClass["critical"].V, 1e-9)

	// checkout's second instance goes down: its scrape fails, staleness
	// markers end its series, and the reader reports it stale (not zero)
	// while the other instance stays known.
	fl.services[1].SetDown(true)
	clk.Advance(15 * time.Second)
	for range fl.servers {
		<-scrapes
	}
	snap, err := r.Read(context.Background(), clk.Now(), signals.PerInstance)
	require.NoError(t, err)
	hosts := fl.hosts()
	down := snap.Get(signals.Key{Service: "checkout", Instance: hosts[1]}, signals.RequestRate)
	require.Equal(t, signals.Stale, down.Status, down.String())
	require.Contains(t, down.Detail, "target down or gone")
	require.True(t, snap.Get(signals.Key{Service: "checkout", Instance: hosts[0]}, signals.RequestRate).Known())
	for _, st := range sc.Targets() {
		if st.URL == fl.servers[1].URL+"/metrics" {
			require.Equal(t, embedded.HealthDown, st.Health)
			require.Contains(t, st.LastError, "503")
		}
	}
}

func ExampleReader() {
	db, _ := embedded.Open(embedded.Options{})
	defer db.Close()
	r, _ := signals.NewReader(db, signals.ReaderOptions{Window: time.Minute})
	q, _ := r.Query(signals.LatencyP99, signals.PerService, "checkout")
	fmt.Println(q)
	snap, _ := r.Read(context.Background(), time.Now(), signals.PerService, "checkout")
	fmt.Println(snap.Get(signals.Key{Service: "checkout"}, signals.LatencyP99))
	// Output:
	// histogram_quantile(0.99, sum by (service, le) (rate(governor_sdk_request_duration_seconds_bucket{ service="checkout", }[1m])))
	// unknown (missing: no series for checkout)
}
