package distribution

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/internal/natsembed"
	"governor.dev/governor/internal/testenv"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/sdk/watch"
)

// servers lists the NATS servers integration tests run against: an embedded
// one and the machine's.
var servers = []struct {
	name  string
	start func(t *testing.T) string
}{
	{"embedded", func(t *testing.T) string { return embedded(t).URL() }},
	{"machine", func(t *testing.T) string { return machineNATS(t) }},
}

func embedded(t testing.TB) *natsembed.Server {
	t.Helper()
	s, err := natsembed.Start(natsembed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// uniqueNames gives each test its own bucket and subjects.
func uniqueNames(t testing.TB) watch.Names {
	t.Helper()
	var b [5]byte
	_, _ = rand.Read(b[:])
	n, err := watch.NewNames("t" + hex.EncodeToString(b[:]))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func connect(t testing.TB, url string) *nats.Conn {
	t.Helper()
	nc, err := watch.Connect(url, nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// plane is the control-plane side of a test: publisher, outbox, relay,
// ledger.
type plane struct {
	names  watch.Names
	nc     *nats.Conn
	pub    *Publisher
	outbox *MemoryOutbox
	ledger *Ledger
	store  *MemoryStore
	reg    *prometheus.Registry
}

func newPlane(t *testing.T, url string) *plane {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	names := uniqueNames(t)
	nc := connect(t, url)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := NewPublisher(ctx, js, PublisherOptions{Names: names, Storage: jetstream.FileStorage, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	p := &plane{names: names, nc: nc, pub: pub, outbox: NewMemoryOutbox(nil), store: NewMemoryStore(), reg: prometheus.NewRegistry()}
	p.ledger, err = NewLedger(LedgerOptions{Store: p.store, Names: names, Registerer: p.reg})
	if err != nil {
		t.Fatal(err)
	}
	relay, err := NewRelay(RelayOptions{Outbox: p.outbox, Publisher: pub, OnPublished: p.ledger.Published, Registerer: p.reg, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = relay.Run(ctx) }()
	go func() { defer wg.Done(); _ = p.ledger.Run(ctx, nc) }()
	_ = nc.Flush()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer dcancel()
		if nc.IsConnected() {
			if err := js.DeleteKeyValue(dctx, names.Bucket()); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
				t.Logf("delete bucket %s: %v", names.Bucket(), err)
			}
		}
	})
	return p
}

// approve writes an outbox row for version v of service, as an approval does.
func (p *plane) approve(t *testing.T, service string, v int64) *rules.Envelope {
	t.Helper()
	env := envelope(t, service, v)
	if _, err := p.outbox.Add(env); err != nil {
		t.Fatal(err)
	}
	return env
}

func envelope(t testing.TB, service string, v int64) *rules.Envelope {
	t.Helper()
	env, err := rules.NewEnvelope(v, &rules.Ruleset{Service: service, Routes: []rules.Route{{
		Name: "api", Match: rules.Match{PathPrefix: "/"}, RateLimit: &rules.RateLimit{Rate: float64(v)},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// recorder is an Applier that fails the test if a version older than the
// one it runs is ever applied (outside an explicit canary abort).
type recorder struct {
	t         *testing.T
	mu        sync.Mutex
	applied   []int64
	refuse    map[int64]bool
	allowBack bool
}

func (r *recorder) Apply(rs *rules.Ruleset, v int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refuse[v] {
		return fmt.Errorf("governor: ruleset v%d refused by the test", v)
	}
	if n := len(r.applied); n > 0 && v <= r.applied[n-1] && !r.allowBack {
		r.t.Errorf("applied v%d after v%d", v, r.applied[n-1])
	}
	r.applied = append(r.applied, v)
	return nil
}

func (r *recorder) versions() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int64(nil), r.applied...)
}

func (r *recorder) last() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.applied) == 0 {
		return 0
	}
	return r.applied[len(r.applied)-1]
}

// sdk is one watcher with its own connection.
type sdk struct {
	w   *watch.Watcher
	app *recorder
	reg *prometheus.Registry
}

type sdkOpts struct {
	instance string
	labels   map[string]string
	cache    string
	maxBytes int
	refuse   map[int64]bool
	back     bool
}

func startSDK(t *testing.T, url string, names watch.Names, service string, o sdkOpts) *sdk {
	t.Helper()
	nc := connect(t, url)
	app := &recorder{t: t, refuse: o.refuse, allowBack: o.back}
	reg := prometheus.NewRegistry()
	if o.cache == "" {
		o.cache = filepath.Join(t.TempDir(), "rules.json")
	}
	w, err := watch.New(watch.Options{Service: service, Instance: o.instance, Labels: o.labels, Conn: nc, Names: names,
		Applier: app, CacheFile: o.cache, MaxBytes: o.maxBytes, Heartbeat: time.Second, Resync: 2 * time.Second,
		RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond, Registerer: reg,
		OnError: func(err error) { t.Logf("watcher %s: %v", o.instance, err) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return &sdk{w: w, app: app, reg: reg}
}

// eventually polls cond until it holds or the deadline passes. Integration
// tests wait for asynchronous delivery this way; the deadline is a failure
// bound, not a latency claim (the benchmark measures latency).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func instanceOf(t *testing.T, p *plane, service, instance string) Instance {
	t.Helper()
	in, _, err := p.store.Instance(context.Background(), service, instance)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// counterValue reads one series of a gathered counter (0 when absent).
func counterValue(t testing.TB, reg *prometheus.Registry, name, label, value string) float64 {
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

// testLogger writes warnings to the test log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func watch10() watch.Selector       { return watch.Selector{Percent: 10} }
func emptySelector() watch.Selector { return watch.Selector{} }

func natsMsg(subject, data string) *nats.Msg { return &nats.Msg{Subject: subject, Data: []byte(data)} }

// counterValue2 reads the counter series with exactly these labels.
func counterValue2(t testing.TB, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// machineNATS and machinePostgres give the machine's services, skipped by
// -short (the fast subset runs without them).
func machineNATS(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: no machine NATS")
	}
	return testenv.NATS(t)
}

func machinePostgres(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: no machine PostgreSQL")
	}
	return testenv.Postgres(t)
}
