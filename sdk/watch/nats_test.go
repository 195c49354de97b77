package watch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/sdk/clock"
)

// natsURL returns the machine's NATS ($GOVERNOR_TEST_NATS or the local
// server), or skips the test (fails it when CI=true). The SDK module keeps to
// its three dependencies, so this mirrors internal/testenv.NATS of the root
// module, where the full integration suite lives (rules/distribution).
func natsURL(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: no machine NATS")
	}
	u := os.Getenv("GOVERNOR_TEST_NATS")
	if u == "" {
		u = "nats://127.0.0.1:4222"
	}
	p, err := url.Parse(u)
	if err != nil {
		t.Fatalf("bad NATS URL %q: %v", u, err)
	}
	c, err := net.DialTimeout("tcp", p.Host, 2*time.Second)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("NATS at %s unavailable in CI: %v", p.Host, err)
		}
		t.Skipf("NATS at %s unavailable: %v", p.Host, err)
	}
	_ = c.Close()
	return u
}

func TestWatcherAgainstNATS(t *testing.T) {
	u := natsURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b [5]byte
	_, _ = rand.Read(b[:])
	names, _ := NewNames("w" + hex.EncodeToString(b[:]))
	nc, err := Connect(u)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: names.Bucket(), Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = js.DeleteKeyValue(context.Background(), names.Bucket()) }()

	reports := reportsOf(t, nc, names.ReportSubject("checkout"))
	beats := make(chan *Heartbeat, 16)
	subH, _ := nc.Subscribe(names.HeartbeatSubject("checkout"), func(m *nats.Msg) {
		if h, err := DecodeHeartbeat(m.Data); err == nil {
			beats <- h
		}
	})
	defer func() { _ = subH.Unsubscribe() }()
	_ = nc.Flush()

	if _, err := kv.Put(ctx, names.StableKey("checkout"), envelopeBytes(t, "checkout", 1)); err != nil {
		t.Fatal(err)
	}
	app := &fakeApplier{}
	cache := filepath.Join(t.TempDir(), "rules.json")
	w, err := New(Options{Service: "checkout", Instance: "pod-0", Labels: map[string]string{"zone": "a"},
		Conn: nc, Names: names, Applier: app, CacheFile: cache, Heartbeat: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(wctx) }()
	defer func() { wcancel(); <-done }()

	next := func(what string) *Report {
		t.Helper()
		select {
		case r := <-reports:
			return r
		case <-ctx.Done():
			t.Fatalf("no report: %s", what)
		}
		return nil
	}
	if r := next("ACK of v1"); r.Status != StatusACK || r.Version != 1 || r.Instance != "pod-0" {
		t.Fatalf("report %+v, want ACK of v1", r)
	}
	select {
	case h := <-beats:
		if h.Instance != "pod-0" || h.Labels["zone"] != "a" || h.IntervalMS != 100 {
			t.Fatalf("heartbeat %+v", h)
		}
	case <-ctx.Done():
		t.Fatal("no heartbeat")
	}

	// A canary for zone a, then abort.
	c := canaryBytes(t, 2, Selector{Labels: map[string]string{"zone": "a"}})
	if _, err := kv.Put(ctx, names.CanaryKey("checkout"), c); err != nil {
		t.Fatal(err)
	}
	if r := next("ACK of the canary"); r.Status != StatusACK || r.Version != 2 {
		t.Fatalf("report %+v, want ACK of v2", r)
	}
	if err := kv.Delete(ctx, names.CanaryKey("checkout")); err != nil {
		t.Fatal(err)
	}
	if r := next("ACK of the return to v1"); r.Status != StatusACK || r.Version != 1 || r.Running != 1 {
		t.Fatalf("report %+v, want ACK of v1 after the abort", r)
	}
	// Garbage: NACK, rules kept.
	if _, err := kv.Put(ctx, names.StableKey("checkout"), []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	if r := next("NACK of garbage"); r.Status != StatusNACK || r.Reason != ReasonNotJSON || r.Running != 1 {
		t.Fatalf("report %+v, want NACK not_json running 1", r)
	}
	if got, err := LoadCache(cache, "checkout"); err != nil || got.Version != 1 {
		t.Fatalf("cache %v %v, want v1", got, err)
	}
}

// TestNoHeartbeatIsBufferedWhileNATSIsDown: a heartbeat due while the
// connection is down is not published. It waited in the reconnect buffer
// with every other one of the outage, and all of them reached the control
// plane at once after the reconnect.
func TestNoHeartbeatIsBufferedWhileNATSIsDown(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	w := newOffline(t, Options{Service: "checkout", Applier: &fakeApplier{}, Clock: clk, Heartbeat: time.Second})
	hb := clk.NewTimer(0)
	w.heartbeat(&hb)
	if n, err := w.nc.Buffered(); err != nil || n != 0 {
		t.Fatalf("%d bytes buffered for NATS (%v), want no heartbeat while disconnected", n, err)
	}
	clk.Advance(time.Second)
	select {
	case <-hb.C():
	default:
		t.Fatal("the next heartbeat is not scheduled")
	}
}

// proxy forwards TCP connections to NATS until cut: then it closes them and
// refuses new ones, as a NATS outage would, until restored.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	t.Cleanup(func() { _ = ln.Close(); p.cut() })
	go p.serve()
	return p
}

// proxiedConn connects through a new proxy to the NATS at u (closed when
// the test ends) and returns the proxy, the connection and the channel that
// hears the connection start reconnecting.
func proxiedConn(t *testing.T, u string) (*proxy, *nats.Conn, <-chan nats.Status) {
	t.Helper()
	p := newProxy(t, strings.TrimPrefix(u, "nats://"))
	nc, err := Connect(p.url(), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return p, nc, nc.StatusChanged(nats.RECONNECTING)
}

// awaitACK waits for the report of an ACK of version v.
func awaitACK(t *testing.T, ctx context.Context, reports <-chan *Report, v int64) {
	t.Helper()
	select {
	case r := <-reports:
		if r.Status != StatusACK || r.Version != v {
			t.Fatalf("report %+v, want ACK of v%d", r, v)
		}
	case <-ctx.Done():
		t.Fatalf("no ACK of v%d", v)
	}
}

func (p *proxy) url() string { return "nats://" + p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(s, c); _ = s.Close() }()
		go func() { _, _ = io.Copy(c, s); _ = c.Close() }()
	}
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func (p *proxy) restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// TestWatcherAfterNATSComesBack: a watcher cut off from NATS takes the
// version published meanwhile once NATS is back, and tells the control
// plane it is alive at once, not a heartbeat period later.
func TestWatcherAfterNATSComesBack(t *testing.T) {
	u := natsURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names, ctl, kv := machineBucket(t, ctx, u, "o")
	reports := reportsOf(t, ctl, names.ReportSubject("checkout"))
	beats := make(chan *Heartbeat, 16)
	subH, _ := ctl.Subscribe(names.HeartbeatSubject("checkout"), func(m *nats.Msg) {
		if h, err := DecodeHeartbeat(m.Data); err == nil {
			beats <- h
		}
	})
	defer func() { _ = subH.Unsubscribe() }()
	_ = ctl.Flush()
	if _, err := kv.Put(ctx, names.StableKey("checkout"), envelopeBytes(t, "checkout", 1)); err != nil {
		t.Fatal(err)
	}

	p, nc, disconnected := proxiedConn(t, u)
	// Heartbeats an hour apart: after the first, only a reconnect sends one.
	w, err := New(Options{Service: "checkout", Instance: "pod-0", Conn: nc, Names: names,
		Applier: &fakeApplier{}, Heartbeat: time.Hour, Resync: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(wctx) }()
	defer func() { wcancel(); <-done }()
	next := func(what string) *Report {
		t.Helper()
		select {
		case r := <-reports:
			return r
		case <-ctx.Done():
			t.Fatalf("no report: %s", what)
			return nil
		}
	}
	beat := func(what string) *Heartbeat {
		t.Helper()
		select {
		case h := <-beats:
			return h
		case <-ctx.Done():
			t.Fatalf("no heartbeat: %s", what)
			return nil
		}
	}
	if r := next("ACK of v1"); r.Status != StatusACK || r.Version != 1 {
		t.Fatalf("report %+v, want ACK of v1", r)
	}
	beat("at start")

	p.cut()
	select {
	case <-disconnected:
	case <-ctx.Done():
		t.Fatal("the watcher's connection did not notice the outage")
	}
	if _, err := kv.Put(ctx, names.StableKey("checkout"), envelopeBytes(t, "checkout", 2)); err != nil {
		t.Fatal(err)
	}
	p.restore()
	if r := next("ACK of v2, published during the outage"); r.Status != StatusACK || r.Version != 2 {
		t.Fatalf("report %+v, want ACK of v2", r)
	}
	beat("after the reconnect")
	if w.Running() != 2 {
		t.Fatalf("running v%d, want v2", w.Running())
	}
}

// TestWatchErrorsAreCountedWhileNATSIsDown: with NATS unreachable (a closed
// port) each failed attempt to establish the watch counts, the watch shows
// as not established, and a publication that fails counts too.
func TestWatchErrorsAreCountedWhileNATSIsDown(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	reg := prometheus.NewRegistry()
	errs := make(chan error, 16)
	w := newOffline(t, Options{Service: "checkout", Applier: &fakeApplier{}, Clock: clk, Registerer: reg,
		RequestTimeout: 50 * time.Millisecond, OnError: func(err error) {
			select {
			case errs <- err:
			default:
			}
		}})
	if got := gauge(t, reg, "governor_sdk_watch_established"); got != 0 {
		t.Fatalf("established = %v before Run, want 0", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	<-errs
	if c := counter(t, reg, "governor_sdk_watch_errors_total", "op", "watch"); c != 1 {
		t.Fatalf("errors{op=watch} = %v, want 1", c)
	}
	if got := gauge(t, reg, "governor_sdk_watch_established"); got != 0 {
		t.Fatalf("established = %v, want 0", got)
	}
	cancel()
	<-done
	w.nc.Close()
	w.sendReport(&Report{Service: "checkout"})
	if c := counter(t, reg, "governor_sdk_watch_errors_total", "op", "publish"); c != 1 {
		t.Fatalf("errors{op=publish} = %v, want 1", c)
	}
}

// TestWatchEstablishedAndResyncErrorsAreExported: the gauge is 1 while the watch is
// established; a resync that fails while NATS is down counts, ends the
// watch (the gauge drops to 0), and each failed attempt to establish it
// again counts too.
func TestWatchEstablishedAndResyncErrorsAreExported(t *testing.T) {
	u := natsURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names, ctl, kv := machineBucket(t, ctx, u, "m")
	reports := reportsOf(t, ctl, names.ReportSubject("checkout"))
	_ = ctl.Flush()
	if _, err := kv.Put(ctx, names.StableKey("checkout"), envelopeBytes(t, "checkout", 1)); err != nil {
		t.Fatal(err)
	}

	p, nc, disconnected := proxiedConn(t, u)
	clk := clock.NewFake(time.Unix(1000, 0))
	reg := prometheus.NewRegistry()
	errs := make(chan error, 64)
	w, err := New(Options{Service: "checkout", Instance: "pod-0", Conn: nc, Names: names, Clock: clk,
		Registerer: reg, Applier: &fakeApplier{}, Heartbeat: 24 * time.Hour, Resync: time.Minute,
		RequestTimeout: 200 * time.Millisecond, OnError: func(err error) {
			select {
			case errs <- err:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(wctx) }()
	defer func() { wcancel(); <-done }()
	awaitACK(t, ctx, reports, 1)
	if got := gauge(t, reg, "governor_sdk_watch_established"); got != 1 {
		t.Fatalf("established = %v with the watch up, want 1", got)
	}

	p.cut()
	select {
	case <-disconnected:
	case <-ctx.Done():
		t.Fatal("the watcher's connection did not notice the outage")
	}
	clk.Advance(time.Minute) // the resync, which fails
	for _, op := range []string{"resync", "watch"} {
		select {
		case <-errs:
		case <-ctx.Done():
			t.Fatalf("no %s error", op)
		}
		if c := counter(t, reg, "governor_sdk_watch_errors_total", "op", op); c != 1 {
			t.Fatalf("errors{op=%s} = %v, want 1", op, c)
		}
	}
	if got := gauge(t, reg, "governor_sdk_watch_established"); got != 0 {
		t.Fatalf("established = %v with NATS down, want 0", got)
	}
}

// machineBucket makes, on the NATS at u, a bucket of fresh names (prefix
// and a random suffix, in memory) deleted when the test ends, and returns
// its names, a control plane's connection to it (closed when the test
// ends) and the bucket.
func machineBucket(t *testing.T, ctx context.Context, u, prefix string) (Names, *nats.Conn, jetstream.KeyValue) {
	t.Helper()
	var b [5]byte
	_, _ = rand.Read(b[:])
	names, _ := NewNames(prefix + hex.EncodeToString(b[:]))
	ctl, err := nats.Connect(u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctl.Close)
	js, _ := jetstream.New(ctl)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: names.Bucket(), Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteKeyValue(context.Background(), names.Bucket()) })
	return names, ctl, kv
}
