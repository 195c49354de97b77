package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/sdk/watch"
)

// Config of one run.
type Config struct {
	Watchers int
	Versions int
	// Server is "embedded" or "machine".
	Server   string
	URL      string
	Interval time.Duration
	Timeout  time.Duration
	// Verbose prints each version's figures to the log.
	Verbose bool
}

// Result is what the command prints.
type Result struct {
	Watchers int     `json:"watchers"`
	Versions int     `json:"versions"`
	P50MS    float64 `json:"p50_ms"`
	P99MS    float64 `json:"p99_ms"`
	MaxMS    float64 `json:"max_ms"`
	Missed   int     `json:"missed"`
}

const service = "bench-propagation"

// Run sets up NATS, the bucket and the watchers, then approves cfg.Versions
// versions one after another and measures each watcher's approve-to-ACK
// latency. Progress goes to log.
func Run(ctx context.Context, cfg Config, log io.Writer) (Result, error) {
	if cfg.Watchers <= 0 || cfg.Versions <= 0 || cfg.Timeout <= 0 || cfg.Interval < 0 {
		return Result{}, errors.New("watchers, versions and timeout must be above 0")
	}
	url := cfg.URL
	switch cfg.Server {
	case "embedded":
		srvURL, stop, err := startEmbedded()
		if err != nil {
			return Result{}, err
		}
		defer stop()
		url = srvURL
	case "machine":
	default:
		return Result{}, fmt.Errorf("-server must be embedded or machine, got %q", cfg.Server)
	}

	var b [5]byte
	_, _ = rand.Read(b[:])
	names, err := watch.NewNames("bench" + hex.EncodeToString(b[:]))
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// Control plane side: the bucket and a publisher that writes like the
	// relay does (read the key, compare-and-set the new version).
	cp, err := nats.Connect(url)
	if err != nil {
		return Result{}, fmt.Errorf("connect %s: %w", url, err)
	}
	defer cp.Close()
	js, err := jetstream.New(cp)
	if err != nil {
		return Result{}, err
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: names.Bucket(), History: 5, Storage: jetstream.MemoryStorage})
	if err != nil {
		return Result{}, fmt.Errorf("bucket: %w", err)
	}
	defer func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer dcancel()
		_ = js.DeleteKeyValue(dctx, names.Bucket())
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	// ACK collector.
	col := newCollector(cfg.Watchers)
	sub, err := cp.Subscribe(names.ReportWildcard(), col.onReport)
	if err != nil {
		return Result{}, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return Result{}, err
	}
	if err := cp.Flush(); err != nil {
		return Result{}, err
	}

	// Watchers, each with its own connection.
	fmt.Fprintf(log, "starting %d watchers on %s\n", cfg.Watchers, url)
	for i := range cfg.Watchers {
		nc, err := watch.Connect(url)
		if err != nil {
			return Result{}, err
		}
		defer nc.Close()
		w, err := watch.New(watch.Options{Service: service, Instance: fmt.Sprintf("w-%04d", i), Conn: nc,
			Names: names, Applier: nopApplier{}, Heartbeat: 30 * time.Second, Resync: time.Minute})
		if err != nil {
			return Result{}, err
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = w.Run(ctx) }()
	}

	// Version 1 warms up: every watcher must have its watch in place.
	approve := func(v int64) (time.Time, error) {
		env, err := rules.NewEnvelope(v, &rules.Ruleset{Service: service, Routes: []rules.Route{{
			Name: "api", Match: rules.Match{PathPrefix: "/"}, RateLimit: &rules.RateLimit{Rate: float64(100 + v)}}}})
		if err != nil {
			return time.Time{}, err
		}
		col.expect(v)
		at := time.Now()
		return at, publish(ctx, kv, names.StableKey(service), env)
	}
	if _, err := approve(1); err != nil {
		return Result{}, err
	}
	if got := col.wait(ctx, 1, time.Minute); got < cfg.Watchers {
		return Result{}, fmt.Errorf("warm-up: %d of %d watchers acknowledged version 1", got, cfg.Watchers)
	}
	fmt.Fprintf(log, "warm-up done; measuring %d versions\n", cfg.Versions)

	res := Result{Watchers: cfg.Watchers, Versions: cfg.Versions}
	var lat []float64
	for i := range cfg.Versions {
		v := int64(i + 2)
		at, err := approve(v)
		if err != nil {
			return Result{}, err
		}
		got := col.wait(ctx, v, cfg.Timeout)
		res.Missed += cfg.Watchers - got
		var vl []float64
		for _, t := range col.times(v) {
			vl = append(vl, float64(t.Sub(at).Microseconds())/1000)
		}
		lat = append(lat, vl...)
		if cfg.Verbose {
			slices.Sort(vl)
			fmt.Fprintf(log, "v%d: %d acks, first %.1f ms, p50 %.1f ms, max %.1f ms\n", v, got, quantile(vl, 0), quantile(vl, 0.5), quantile(vl, 1))
		}
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		select {
		case <-time.After(cfg.Interval):
		case <-ctx.Done():
			return Result{}, ctx.Err()
		}
	}
	slices.Sort(lat)
	res.P50MS, res.P99MS = quantile(lat, 0.50), quantile(lat, 0.99)
	if len(lat) > 0 {
		res.MaxMS = math.Round(lat[len(lat)-1]*10) / 10
	}
	return res, nil
}

// quantile of sorted samples (nearest rank), rounded to 0.1 ms.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	i = max(0, min(i, len(sorted)-1))
	return math.Round(sorted[i]*10) / 10
}

type nopApplier struct{}

func (nopApplier) Apply(*rules.Ruleset, int64) error { return nil }

// collector records the arrival time of each watcher's first ACK per version.
type collector struct {
	n    int
	mu   sync.Mutex
	acks map[int64]map[string]time.Time
	done map[int64]chan struct{}
}

func newCollector(n int) *collector {
	return &collector{n: n, acks: map[int64]map[string]time.Time{}, done: map[int64]chan struct{}{}}
}

func (c *collector) expect(v int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.acks[v] == nil {
		c.acks[v] = map[string]time.Time{}
		c.done[v] = make(chan struct{})
	}
}

func (c *collector) onReport(m *nats.Msg) {
	now := time.Now()
	r, err := watch.DecodeReport(m.Data)
	if err != nil || r.Status != watch.StatusACK {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	got := c.acks[r.Version]
	if got == nil {
		return
	}
	if _, dup := got[r.Instance]; dup {
		return
	}
	got[r.Instance] = now
	if len(got) == c.n {
		close(c.done[r.Version])
	}
}

// wait returns how many watchers acknowledged v within timeout.
func (c *collector) wait(ctx context.Context, v int64, timeout time.Duration) int {
	c.mu.Lock()
	done := c.done[v]
	c.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	case <-ctx.Done():
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.acks[v])
}

func (c *collector) times(v int64) []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]time.Time, 0, len(c.acks[v]))
	for _, t := range c.acks[v] {
		out = append(out, t)
	}
	return out
}

// publish writes the envelope as the control plane's relay does: read the
// key's revision, then compare-and-set the new version on it.
func publish(ctx context.Context, kv jetstream.KeyValue, key string, env *rules.Envelope) error {
	data, err := json.Marshal(env)
	if err != nil {
		return err
	}
	cur, err := kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		_, err = kv.Create(ctx, key, data)
	case err != nil:
		return err
	default:
		_, err = kv.Update(ctx, key, data, cur.Revision())
	}
	return err
}

// startEmbedded starts a NATS server with JetStream in a temporary
// directory on a random loopback port; stop shuts it down and removes the
// directory. (The control plane's internal/natsembed does the same; the bench
// module keeps to the SDK and NATS so it does not follow the root module's
// requirements.)
func startEmbedded() (url string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "propagation-nats-")
	if err != nil {
		return "", nil, err
	}
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
		StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, err
	}
	go srv.Start()
	stop = func() {
		srv.Shutdown()
		srv.WaitForShutdown()
		_ = os.RemoveAll(dir)
	}
	if !srv.ReadyForConnections(10 * time.Second) {
		stop()
		return "", nil, errors.New("embedded NATS not ready within 10s")
	}
	return srv.ClientURL(), stop, nil
}
