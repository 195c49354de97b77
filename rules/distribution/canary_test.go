package distribution

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/sdk/watch"
)

// payloadOf is the outbox payload of version v of service.
func payloadOf(t *testing.T, service string, v int64) []byte {
	t.Helper()
	b, err := json.Marshal(envelope(t, service, v))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// canaryVersion returns the version staged for service, 0 if none.
func canaryVersion(t *testing.T, p *Publisher, service string) int64 {
	t.Helper()
	c, err := p.Canary(context.Background(), service)
	if err != nil {
		t.Fatal(err)
	}
	if c == nil {
		return 0
	}
	return c.Envelope.Version
}

// stableVersion returns the stable version of service, 0 if none.
func stableVersion(t *testing.T, p *Publisher, service string) int64 {
	t.Helper()
	env, err := p.Latest(context.Background(), service)
	if err != nil {
		t.Fatal(err)
	}
	if env == nil {
		return 0
	}
	return env.Version
}

// hookKV plays a concurrent writer: once, right after the first successful
// Get (or, with write set, Create or Update) of key, it runs then.
type hookKV struct {
	jetstream.KeyValue
	key   string
	write bool
	then  func()
}

func (h *hookKV) fire(key string, write bool) {
	if key == h.key && write == h.write && h.then != nil {
		f := h.then
		h.then = nil
		f()
	}
}

func (h *hookKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	e, err := h.KeyValue.Get(ctx, key)
	if err == nil {
		h.fire(key, false)
	}
	return e, err
}

func (h *hookKV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	r, err := h.KeyValue.Update(ctx, key, value, rev)
	if err == nil {
		h.fire(key, true)
	}
	return r, err
}

func (h *hookKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	r, err := h.KeyValue.Create(ctx, key, value, opts...)
	if err == nil {
		h.fire(key, true)
	}
	return r, err
}

// A relay retrying a canary row whose staging failed must not replace a
// newer canary staged meanwhile, nor publish the older version to every
// instance: the row is done as superseded.
func TestRelayRetryDoesNotDowngradeRunningCanary(t *testing.T) {
	ctx := context.Background()
	pub := newTestPublisher(t, embedded(t).URL())
	clk := clock.NewFake(time.Unix(1000, 0))
	outbox := NewMemoryOutbox(clk)
	reg := prometheus.NewRegistry()
	var mu sync.Mutex
	failedOnce := false
	relay, err := NewRelay(RelayOptions{Outbox: outbox, Publisher: pub, Clock: clk, Logger: testLogger(t), Registerer: reg,
		Stage: func(_ context.Context, it versioning.OutboxItem) (*watch.Selector, error) {
			mu.Lock()
			defer mu.Unlock()
			if it.Version == 2 && !failedOnce {
				failedOnce = true
				return nil, errors.New("transient: NATS request timed out")
			}
			return &watch.Selector{Percent: 10}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []int64{2, 3} {
		if _, err := outbox.Add(envelope(t, "checkout", v)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := relay.Pass(ctx); err == nil {
		t.Fatal("first pass: want the stage error of v2")
	}
	if v := canaryVersion(t, pub, "checkout"); v != 3 {
		t.Fatalf("after the first pass the canary is v%d, want v3", v)
	}
	if _, err := relay.Pass(ctx); err != nil {
		t.Fatalf("retry of v2: %v", err)
	}
	if v := canaryVersion(t, pub, "checkout"); v != 3 {
		t.Fatalf("after the retry of v2 the canary is v%d, want v3", v)
	}
	if v := stableVersion(t, pub, "checkout"); v != 0 {
		t.Fatalf("the retry of v2 published v%d to every instance, want nothing published", v)
	}
	if outbox.Pending() != 0 {
		t.Fatal("row v2 not marked done")
	}
	if got := counterValue(t, reg, "governor_distribution_relay_rows_total", "outcome", string(Superseded)); got != 1 {
		t.Fatalf("superseded rows = %v, want 1 (v2)", got)
	}
}

// Promote removes only the canary it promoted: a newer version staged while
// the promotion ran stays staged.
func TestPromoteKeepsACanaryStagedMeanwhile(t *testing.T) {
	ctx := context.Background()
	pub := newTestPublisher(t, embedded(t).URL())
	if _, err := pub.StartCanary(ctx, payloadOf(t, "checkout", 3), watch10()); err != nil {
		t.Fatal(err)
	}
	pub.kv = &hookKV{KeyValue: pub.kv, key: pub.names.StableKey("checkout"), write: true, then: func() {
		// The relay stages v4 once v3 reached the stable key.
		if _, err := pub.StartCanary(ctx, payloadOf(t, "checkout", 4), watch10()); err != nil {
			t.Errorf("stage v4: %v", err)
		}
	}}
	if env, err := pub.Promote(ctx, "checkout"); err != nil || env.Version != 3 {
		t.Fatalf("promote = %v, %v; want v3", env, err)
	}
	if v := stableVersion(t, pub, "checkout"); v != 3 {
		t.Fatalf("stable v%d, want v3", v)
	}
	if v := canaryVersion(t, pub, "checkout"); v != 4 {
		t.Fatalf("canary v%d after promoting v3, want v4 (staged during the promotion)", v)
	}
}

// Abort removes only the canary it read: if a newer version replaced it
// meanwhile, that one stays staged and Abort says nothing was aborted.
func TestAbortKeepsACanaryStagedMeanwhile(t *testing.T) {
	ctx := context.Background()
	pub := newTestPublisher(t, embedded(t).URL())
	if _, err := pub.StartCanary(ctx, payloadOf(t, "checkout", 3), watch10()); err != nil {
		t.Fatal(err)
	}
	pub.kv = &hookKV{KeyValue: pub.kv, key: pub.names.CanaryKey("checkout"), then: func() {
		// The relay stages v4 after the operator's abort read v3.
		if _, err := pub.StartCanary(ctx, payloadOf(t, "checkout", 4), watch10()); err != nil {
			t.Errorf("stage v4: %v", err)
		}
	}}
	if env, err := pub.Abort(ctx, "checkout"); !errors.Is(err, ErrStale) || env != nil {
		t.Fatalf("abort = %v, %v; want ErrStale", env, err)
	}
	if v := canaryVersion(t, pub, "checkout"); v != 4 {
		t.Fatalf("canary v%d after the abort of v3, want v4 (staged during the abort)", v)
	}
}

// A relay that staged a canary and died before marking the row done leaves
// the row to the next relay. The next relay must not stage again a version
// the operator aborted meanwhile, nor publish it; if the canary is still
// staged, the row is a duplicate and the ledger is told of it.
func TestNextRelayRespectsTheCanaryStagedByAKilledRelay(t *testing.T) {
	tests := []struct {
		name string
		// operator acts between the killed relay and the next one.
		operator func(t *testing.T, pub *Publisher)
		canary   int64 // staged after the next relay's pass
		outcome  Outcome
		told     bool // OnPublished was called
	}{
		{"aborted meanwhile", func(t *testing.T, pub *Publisher) {
			if _, err := pub.Abort(context.Background(), "checkout"); err != nil {
				t.Fatal(err)
			}
		}, 0, Superseded, false},
		{"still staged", func(*testing.T, *Publisher) {}, 7, Duplicate, true},
	}
	url := embedded(t).URL()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewFake(time.Unix(1000, 0))
			outbox := NewMemoryOutbox(clk)
			pub := newTestPublisher(t, url)
			if _, err := outbox.Add(envelope(t, "checkout", 7)); err != nil {
				t.Fatal(err)
			}
			// The killed relay claimed the row and staged it.
			items, err := outbox.ClaimOutbox(ctx, 10, 30*time.Second)
			if err != nil || len(items) != 1 {
				t.Fatalf("claim: %v %v", items, err)
			}
			if _, err := pub.StartCanary(ctx, items[0].Payload, watch10()); err != nil {
				t.Fatal(err)
			}
			tt.operator(t, pub)
			reg := prometheus.NewRegistry()
			told := false
			next, err := NewRelay(RelayOptions{Outbox: outbox, Publisher: pub, Clock: clk, Logger: testLogger(t), Registerer: reg,
				Stage: func(context.Context, versioning.OutboxItem) (*watch.Selector, error) {
					s := watch10()
					return &s, nil
				},
				OnPublished: func(context.Context, *rules.Envelope, *watch.Selector) error { told = true; return nil }})
			if err != nil {
				t.Fatal(err)
			}
			clk.Advance(31 * time.Second) // past the lease
			if n, err := next.Pass(ctx); n != 1 || err != nil {
				t.Fatalf("pass after the lease: %d rows, %v", n, err)
			}
			if v := canaryVersion(t, pub, "checkout"); v != tt.canary {
				t.Fatalf("canary v%d, want v%d", v, tt.canary)
			}
			if v := stableVersion(t, pub, "checkout"); v != 0 {
				t.Fatalf("v%d published to every instance, want nothing", v)
			}
			if outbox.Pending() != 0 {
				t.Fatal("row not marked done")
			}
			if got := counterValue(t, reg, "governor_distribution_relay_rows_total", "outcome", string(tt.outcome)); got != 1 {
				t.Fatalf("%s rows = %v, want 1", tt.outcome, got)
			}
			if told != tt.told {
				t.Fatalf("ledger told: %v, want %v", told, tt.told)
			}
		})
	}
}

// Canary versions only go forward: StartCanary refuses a version that is
// not newer than the running canary or than one staged and aborted before.
func TestStartCanaryRefusesVersionsStagedBefore(t *testing.T) {
	ctx := context.Background()
	pub := newTestPublisher(t, embedded(t).URL())
	if _, err := pub.StartCanary(ctx, payloadOf(t, "checkout", 5), watch10()); err != nil {
		t.Fatal(err)
	}
	for _, v := range []int64{4, 5} {
		if _, err := pub.StartCanary(ctx, payloadOf(t, "checkout", v), watch10()); !errors.Is(err, ErrStale) || !errors.Is(err, ErrInvalid) {
			t.Fatalf("v%d while v5 runs: %v, want ErrStale and ErrInvalid", v, err)
		}
	}
	other, err := rules.NewEnvelope(5, &rules.Ruleset{Service: "checkout", Routes: []rules.Route{{
		Name: "api", Match: rules.Match{PathPrefix: "/"}, RateLimit: &rules.RateLimit{Rate: 500},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pub.StartCanary(ctx, b, watch10()); !errors.Is(err, ErrConflict) {
		t.Fatalf("v5 with other content while v5 runs: %v, want ErrConflict", err)
	}
	if _, err := pub.Abort(ctx, "checkout"); err != nil {
		t.Fatal(err)
	}
	for _, v := range []int64{4, 5} {
		if _, err := pub.StartCanary(ctx, payloadOf(t, "checkout", v), watch10()); !errors.Is(err, ErrStale) {
			t.Fatalf("v%d after v5 was aborted: %v, want ErrStale", v, err)
		}
	}
	if v := canaryVersion(t, pub, "checkout"); v != 0 {
		t.Fatalf("canary v%d, want none", v)
	}
	if _, err := pub.StartCanary(ctx, payloadOf(t, "checkout", 6), watch10()); err != nil {
		t.Fatalf("v6 after v5 was aborted: %v", err)
	}
	if v := canaryVersion(t, pub, "checkout"); v != 6 {
		t.Fatalf("canary v%d, want v6", v)
	}
}

// Promote of a canary a newer stable version overtook (a rollback published
// while it was staged) promotes nothing: it fails with ErrStale, leaves the
// stable version alone and withdraws the canary.
func TestPromoteOfAnOvertakenCanaryFails(t *testing.T) {
	ctx := context.Background()
	pub := newTestPublisher(t, embedded(t).URL())
	if _, _, err := pub.Publish(ctx, payloadOf(t, "checkout", 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := pub.StartCanary(ctx, payloadOf(t, "checkout", 3), watch10()); err != nil {
		t.Fatal(err)
	}
	// The rollback to v2's content, as version 4, goes to the stable key.
	if out, _, err := pub.Publish(ctx, payloadOf(t, "checkout", 4)); err != nil || out != Published {
		t.Fatalf("publish v4: %v %v", out, err)
	}
	if env, err := pub.Promote(ctx, "checkout"); !errors.Is(err, ErrStale) || env != nil {
		t.Fatalf("promote = %v, %v; want ErrStale", env, err)
	}
	if v := stableVersion(t, pub, "checkout"); v != 4 {
		t.Fatalf("stable v%d, want v4", v)
	}
	if v := canaryVersion(t, pub, "checkout"); v != 0 {
		t.Fatalf("canary v%d after the failed promotion, want none", v)
	}
}
