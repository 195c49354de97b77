package distribution

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/sdk/watch"
)

// history returns every value ever written to the service's stable key.
func history(t *testing.T, p *Publisher, service string) []jetstream.KeyValueEntry {
	t.Helper()
	h, err := p.kv.History(context.Background(), p.names.StableKey(service))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func newTestPublisher(t testing.TB, url string) *Publisher {
	t.Helper()
	names := uniqueNames(t)
	js, err := jetstream.New(connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPublisher(context.Background(), js, PublisherOptions{Names: names, History: 64, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteKeyValue(context.Background(), names.Bucket()) })
	return p
}

func TestKilledRelayLeavesTheRowToBePublishedExactlyOnce(t *testing.T) {
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) { killedRelay(t, srv.start(t)) })
	}
}

func killedRelay(t *testing.T, url string) {
	tests := []struct {
		name string
		// die simulates what the first relay did before it was killed.
		die func(t *testing.T, p *Publisher, it []byte)
		// outcome the next relay records for the row.
		outcome Outcome
	}{
		{"after commit, before publish", func(*testing.T, *Publisher, []byte) {}, Published},
		{"after publish, before mark", func(t *testing.T, p *Publisher, payload []byte) {
			if out, _, err := p.Publish(context.Background(), payload); err != nil || out != Published {
				t.Fatalf("first publish: %v %v", out, err)
			}
		}, Duplicate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewFake(time.Unix(1000, 0))
			outbox := NewMemoryOutbox(clk)
			pub := newTestPublisher(t, url)
			if _, err := outbox.Add(envelope(t, "checkout", 7)); err != nil {
				t.Fatal(err)
			}
			// The first relay claims the row and dies.
			items, err := outbox.ClaimOutbox(ctx, 10, 30*time.Second)
			if err != nil || len(items) != 1 {
				t.Fatalf("claim: %v %v", items, err)
			}
			tt.die(t, pub, items[0].Payload)

			reg := prometheus.NewRegistry()
			next, err := NewRelay(RelayOptions{Outbox: outbox, Publisher: pub, Clock: clk, Registerer: reg})
			if err != nil {
				t.Fatal(err)
			}
			if n, err := next.Pass(ctx); n != 0 || err != nil {
				t.Fatalf("pass during the lease relayed %d rows (%v), want 0", n, err)
			}
			clk.Advance(31 * time.Second)
			if n, err := next.Pass(ctx); n != 1 || err != nil {
				t.Fatalf("pass after the lease relayed %d rows (%v), want 1", n, err)
			}
			if n, err := next.Pass(ctx); n != 0 || err != nil {
				t.Fatalf("a later pass relayed %d rows (%v), want 0", n, err)
			}
			if h := history(t, pub, "checkout"); len(h) != 1 {
				t.Fatalf("the key was written %d times, want exactly once", len(h))
			}
			if outbox.Pending() != 0 {
				t.Fatal("row not marked done")
			}
			if got := counterValue(t, reg, "governor_distribution_relay_rows_total", "outcome", string(tt.outcome)); got != 1 {
				t.Fatalf("rows{outcome=%s} = %v, want 1", tt.outcome, got)
			}
		})
	}
}

func TestPublishIsIdempotentAndNeverGoesBack(t *testing.T) {
	url := embedded(t).URL()
	ctx := context.Background()
	pub := newTestPublisher(t, url)
	payload := func(v int64) []byte {
		b, _ := json.Marshal(envelope(t, "checkout", v))
		return b
	}
	steps := []struct {
		version int64
		want    Outcome
	}{
		{3, Published}, {3, Duplicate}, {2, Superseded}, {5, Published}, {4, Superseded}, {5, Duplicate},
	}
	for _, s := range steps {
		out, _, err := pub.Publish(ctx, payload(s.version))
		if err != nil || out != s.want {
			t.Fatalf("publish v%d = %v, %v; want %v", s.version, out, err, s.want)
		}
	}
	if got, _ := pub.Latest(ctx, "checkout"); got.Version != 5 {
		t.Fatalf("latest v%d, want v5", got.Version)
	}
	if h := history(t, pub, "checkout"); len(h) != 2 {
		t.Fatalf("%d writes, want 2 (v3, v5)", len(h))
	}

	// Same number, other content: a conflict, nothing written.
	other := envelope(t, "checkout", 5)
	other.Ruleset.Routes[0].RateLimit.Rate = 999
	other.Checksum, _ = other.Ruleset.Checksum()
	b, _ := json.Marshal(other)
	if _, _, err := pub.Publish(ctx, b); !errors.Is(err, ErrConflict) {
		t.Fatalf("err = %v, want ErrConflict", err)
	}
	// Not an envelope: refused.
	if _, _, err := pub.Publish(ctx, []byte(`{"service":"checkout"}`)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v, want ErrInvalid", err)
	}
}

func TestConcurrentPublishersEndOnTheNewestVersion(t *testing.T) {
	url := embedded(t).URL()
	ctx := context.Background()
	pub := newTestPublisher(t, url)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := int64(1 + w); v <= 40; v += 4 {
				b, _ := json.Marshal(envelope(t, "checkout", v))
				if _, _, err := pub.Publish(ctx, b); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	h := history(t, pub, "checkout")
	var last int64
	for _, e := range h {
		env, _ := versionIn(e.Value())
		if env.Version <= last {
			t.Fatalf("v%d written after v%d", env.Version, last)
		}
		last = env.Version
	}
	if last != 40 {
		t.Fatalf("ended on v%d, want v40", last)
	}
}

func TestCanaryRules(t *testing.T) {
	url := embedded(t).URL()
	ctx := context.Background()
	pub := newTestPublisher(t, url)
	b := func(v int64) []byte {
		x, _ := json.Marshal(envelope(t, "checkout", v))
		return x
	}
	if _, err := pub.Promote(ctx, "checkout"); !errors.Is(err, ErrNoCanary) {
		t.Fatalf("promote without canary: %v", err)
	}
	if _, err := pub.Abort(ctx, "checkout"); !errors.Is(err, ErrNoCanary) {
		t.Fatalf("abort without canary: %v", err)
	}
	if _, _, err := pub.Publish(ctx, b(4)); err != nil {
		t.Fatal(err)
	}
	if _, err := pub.StartCanary(ctx, b(4), watch10()); !errors.Is(err, ErrInvalid) || !errors.Is(err, ErrStale) {
		t.Fatalf("canary of the stable version: %v, want ErrInvalid and ErrStale", err)
	}
	if _, err := pub.StartCanary(ctx, b(5), emptySelector()); !errors.Is(err, ErrInvalid) {
		t.Fatalf("canary without selector: %v, want ErrInvalid", err)
	}
	if _, err := pub.StartCanary(ctx, b(5), watch10()); err != nil {
		t.Fatal(err)
	}
	if c, err := pub.Canary(ctx, "checkout"); err != nil || c.Envelope.Version != 5 || c.Selector.Percent != 10 {
		t.Fatalf("canary = %+v, %v", c, err)
	}
	env, err := pub.Promote(ctx, "checkout")
	if err != nil || env.Version != 5 {
		t.Fatalf("promote = %v, %v", env, err)
	}
	if latest, _ := pub.Latest(ctx, "checkout"); latest.Version != 5 {
		t.Fatalf("stable after promote v%d", latest.Version)
	}
	if c, err := pub.Canary(ctx, "checkout"); c != nil || err != nil {
		t.Fatalf("canary after promote = %+v, %v", c, err)
	}
}

func TestRelayRetriesAFailedPublicationWithinItsLease(t *testing.T) {
	srv := embedded(t)
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(1000, 0))
	outbox := NewMemoryOutbox(clk)
	names := uniqueNames(t)
	js, err := jetstream.New(connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := NewPublisher(ctx, js, PublisherOptions{Names: names, Storage: jetstream.FileStorage, Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	relay, err := NewRelay(RelayOptions{Outbox: outbox, Publisher: pub, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.Add(envelope(t, "checkout", 1)); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	if n, err := relay.Pass(ctx); n != 1 || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("pass with NATS down: %d rows, %v; want 1 row, ErrUnavailable", n, err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	// Same virtual instant: the lease has not expired, yet the relay retries
	// the row it holds.
	for i := 0; outbox.Pending() != 0; i++ {
		if i == 100 {
			t.Fatal("row never published after NATS came back")
		}
		if _, err := relay.Pass(ctx); err != nil {
			t.Logf("pass while reconnecting: %v", err)
		}
	}
	if got, err := pub.Latest(ctx, "checkout"); err != nil || got.Version != 1 {
		t.Fatalf("latest = %v, %v", got, err)
	}
}

func TestRelayRefusesARowWhosePayloadDisagrees(t *testing.T) {
	url := embedded(t).URL()
	ctx := context.Background()
	tests := []struct {
		name   string
		mangle func(it *versioning.OutboxItem)
	}{
		{"other service", func(it *versioning.OutboxItem) { it.Service = "payments" }},
		{"other version", func(it *versioning.OutboxItem) { it.Version = 99 }},
		{"not an envelope", func(it *versioning.OutboxItem) { it.Payload = []byte(`{"service":"checkout"}`) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			outbox := NewMemoryOutbox(nil)
			pub := newTestPublisher(t, url)
			if _, err := outbox.Add(envelope(t, "checkout", 1)); err != nil {
				t.Fatal(err)
			}
			tt.mangle(&outbox.rows[0].item)
			relay, err := NewRelay(RelayOptions{Outbox: outbox, Publisher: pub})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := relay.Pass(ctx); !errors.Is(err, ErrInvalid) {
				t.Fatalf("pass = %v, want ErrInvalid", err)
			}
			if h := history(t, pub, "checkout"); len(h) != 0 {
				t.Fatalf("%d values published, want none", len(h))
			}
			if outbox.Pending() != 1 {
				t.Fatal("the row was marked done")
			}
			if u, err := relay.Undeliverable(ctx, ""); err != nil || len(u) != 1 || u[0].Reason != ReasonInvalid || u[0].OutboxID != 1 {
				t.Fatalf("undeliverable %+v, want the row as invalid", u)
			}
			if _, err := relay.Pass(ctx); err != nil {
				t.Fatalf("the row was retried: %v", err)
			}
		})
	}
}

// flakyLedgerStore fails SetTarget while fail is set (the rules database
// restarting).
type flakyLedgerStore struct {
	*MemoryStore
	mu   sync.Mutex
	fail bool
}

func (f *flakyLedgerStore) setFail(fail bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = fail
}

func (f *flakyLedgerStore) SetTarget(ctx context.Context, prev *Target, t Target) error {
	f.mu.Lock()
	fail := f.fail
	f.mu.Unlock()
	if fail {
		return errors.New("connection refused")
	}
	return f.MemoryStore.SetTarget(ctx, prev, t)
}

// A publication the ledger could not record keeps its row: the relay
// retries it (a duplicate in the bucket) until the ledger knows the new
// version, and only then marks the row done.
func TestRelayKeepsARowTheLedgerDidNotRecord(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(1000, 0))
	outbox := NewMemoryOutbox(clk)
	pub := newTestPublisher(t, embedded(t).URL())
	store := &flakyLedgerStore{MemoryStore: NewMemoryStore()}
	ledger, err := NewLedger(LedgerOptions{Store: store, Names: pub.Names(), Clock: clk, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	relay, err := NewRelay(RelayOptions{Outbox: outbox, Publisher: pub, OnPublished: ledger.Published, Clock: clk,
		Registerer: reg, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.Add(envelope(t, "checkout", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := relay.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	store.setFail(true)
	if _, err := outbox.Add(envelope(t, "checkout", 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := relay.Pass(ctx); err == nil {
		t.Fatal("pass while the ledger cannot record: want its error")
	}
	if outbox.Pending() != 1 {
		t.Fatal("row v2 marked done although the ledger did not record it")
	}
	if got := counterValue(t, reg, "governor_distribution_relay_failures_total", "stage", "ledger"); got != 1 {
		t.Fatalf("ledger failures = %v, want 1", got)
	}
	store.setFail(false)
	if _, err := relay.Pass(ctx); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if outbox.Pending() != 0 {
		t.Fatal("row v2 not marked done after the ledger recorded it")
	}
	if got := counterValue(t, reg, "governor_distribution_relay_rows_total", "outcome", string(Duplicate)); got != 1 {
		t.Fatalf("duplicate rows = %v, want 1 (the retry of v2)", got)
	}
	if tg, ok, err := store.Target(ctx, "checkout"); err != nil || !ok || tg.Stable != 2 {
		t.Fatalf("ledger target %+v (%v, %v), want stable v2", tg, ok, err)
	}
}

// A relay retrying a canary row it staged (its ledger write failed) tells
// the ledger the selector the bucket stages, not the one the row was staged
// with: a person may have widened the canary meanwhile.
func TestRelayRetryTellsTheLedgerTheSelectorStagedNow(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(1000, 0))
	outbox := NewMemoryOutbox(clk)
	pub := newTestPublisher(t, embedded(t).URL())
	store := &flakyLedgerStore{MemoryStore: NewMemoryStore()}
	ledger, err := NewLedger(LedgerOptions{Store: store, Names: pub.Names(), Clock: clk, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	relay, err := NewRelay(RelayOptions{Outbox: outbox, Publisher: pub, OnPublished: ledger.Published, Clock: clk,
		Registerer: prometheus.NewRegistry(), Logger: testLogger(t),
		Stage: func(_ context.Context, it versioning.OutboxItem) (*watch.Selector, error) {
			if it.Version == 1 {
				return nil, nil
			}
			return &watch.Selector{Percent: 10}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.Add(envelope(t, "checkout", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := relay.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	store.setFail(true)
	if _, err := outbox.Add(envelope(t, "checkout", 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := relay.Pass(ctx); err == nil {
		t.Fatal("pass while the ledger cannot record: want its error")
	}
	store.setFail(false)
	wide := watch.Selector{Percent: 50}
	env, err := pub.SetCanarySelector(ctx, "checkout", 2, wide) // as Plane.SetCanarySelector does
	if err != nil {
		t.Fatal(err)
	}
	if err := ledger.Published(ctx, env, &wide); err != nil {
		t.Fatal(err)
	}
	if _, err := relay.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if outbox.Pending() != 0 {
		t.Fatal("row v2 not marked done")
	}
	tg, _, _ := store.Target(ctx, "checkout")
	if tg.Canary != 2 || tg.Selector == nil || tg.Selector.Percent != 50 {
		t.Fatalf("ledger target %+v, want canary v2 on the 50%% the bucket stages", tg)
	}
}

// envelopeWithRate is version v of service with another content than
// envelope's (as a version numbered anew by a reset rules database).
func envelopeWithRate(t *testing.T, service string, v int64, rate float64) *rules.Envelope {
	t.Helper()
	env, err := rules.NewEnvelope(v, &rules.Ruleset{Service: service, Routes: []rules.Route{{
		Name: "api", Match: rules.Match{PathPrefix: "/"}, RateLimit: &rules.RateLimit{Rate: rate}}}})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// TestRelayGivesUpOnAVersionTheBucketHoldsWithOtherContent: after the
// rules database was reset, the relay finds the bucket holding the row's
// version number with other content (ErrConflict). Retrying cannot help:
// it records the row as undeliverable (reason "conflict", both checksums
// in the error), logs and counts it once and stops retrying, without
// overwriting the bucket; a newer version is published and supersedes the
// record.
func TestRelayGivesUpOnAVersionTheBucketHoldsWithOtherContent(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(1000, 0))
	outbox := NewMemoryOutbox(clk)
	pub := newTestPublisher(t, embedded(t).URL())
	reg := prometheus.NewRegistry()
	var told []Undeliverable
	relay, err := NewRelay(RelayOptions{Outbox: outbox, Publisher: pub, Clock: clk, Registerer: reg, Logger: testLogger(t),
		OnUndeliverable: func(_ context.Context, u Undeliverable) { told = append(told, u) }})
	if err != nil {
		t.Fatal(err)
	}
	before := envelopeWithRate(t, "checkout", 3, 1000) // published before the reset
	payload, err := json.Marshal(before)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := pub.Publish(ctx, payload); err != nil {
		t.Fatal(err)
	}
	now := envelope(t, "checkout", 3)
	if _, err := outbox.Add(now); err != nil {
		t.Fatal(err)
	}
	if _, err := relay.Pass(ctx); !errors.Is(err, ErrConflict) {
		t.Fatalf("pass = %v, want ErrConflict", err)
	}
	for i := range 3 {
		clk.Advance(time.Minute) // past the lease
		if n, err := relay.Pass(ctx); n != 0 || err != nil {
			t.Fatalf("pass %d after the conflict: %d rows, %v; want the row given up on", i, n, err)
		}
	}
	u, err := relay.Undeliverable(ctx, "")
	if err != nil || len(u) != 1 || u[0].Reason != ReasonConflict || u[0].Version != 3 ||
		!strings.Contains(u[0].Error, before.Checksum) || !strings.Contains(u[0].Error, now.Checksum) {
		t.Fatalf("undeliverable %+v (%v), want v3 as a conflict naming both checksums", u, err)
	}
	if len(told) != 1 {
		t.Fatalf("OnUndeliverable told %d times, want once", len(told))
	}
	if got := counterValue(t, reg, "governor_distribution_relay_rows_total", "outcome", "undeliverable"); got != 1 {
		t.Fatalf("undeliverable rows = %v, want 1", got)
	}
	if got, err := pub.Latest(ctx, "checkout"); err != nil || got.Checksum != before.Checksum {
		t.Fatalf("latest %+v (%v): the bucket's v3 must stay as it was", got, err)
	}
	if _, err := outbox.Add(envelope(t, "checkout", 4)); err != nil {
		t.Fatal(err)
	}
	if _, err := relay.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := pub.Latest(ctx, "checkout"); err != nil || got.Version != 4 {
		t.Fatalf("latest %+v (%v), want v4", got, err)
	}
	if u, _ := relay.Undeliverable(ctx, ""); len(u) != 0 {
		t.Fatalf("undeliverable %+v after v4 was published, want none", u)
	}
}

// failingStage fails while fail is set, as a Stage whose store is down.
func failingStage(fail *atomic.Bool) func(context.Context, versioning.OutboxItem) (*watch.Selector, error) {
	return func(context.Context, versioning.OutboxItem) (*watch.Selector, error) {
		if fail.Load() {
			return nil, errors.New("connection refused")
		}
		return nil, nil
	}
}

// relayHoldingCheckoutV3 is a relay whose publication of checkout v3
// failed at staging (while fail is set, as it is on return), so that it
// holds the row, leased, for its next pass.
func relayHoldingCheckoutV3(t *testing.T) (*MemoryOutbox, *Publisher, *Relay, *atomic.Bool) {
	t.Helper()
	clk := clock.NewFake(time.Unix(1000, 0))
	outbox := NewMemoryOutbox(clk)
	pub := newTestPublisher(t, embedded(t).URL())
	fail := &atomic.Bool{}
	fail.Store(true)
	relay, err := NewRelay(RelayOptions{Outbox: outbox, Publisher: pub, Clock: clk, Logger: testLogger(t), Stage: failingStage(fail)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.Add(envelope(t, "checkout", 3)); err != nil {
		t.Fatal(err)
	}
	if _, err := relay.Pass(context.Background()); err == nil {
		t.Fatal("pass = nil, want the staging error")
	}
	return outbox, pub, relay, fail
}

// TestRelayRetriesTheStoresCopyOfARowNotTheOneItHeld: a relay holds a row
// whose publication failed; the rules database is restored meanwhile, and
// the row of that id is now another content, free to claim, which another
// relay published. The relay claims it again and relays the store's copy
// (a duplicate), instead of retrying the copy it held, which conflicts with
// the bucket forever.
func TestRelayRetriesTheStoresCopyOfARowNotTheOneItHeld(t *testing.T) {
	ctx := context.Background()
	outbox, pub, relay, fail := relayHoldingCheckoutV3(t)
	restored := envelopeWithRate(t, "checkout", 3, 1000)
	payload, err := json.Marshal(restored)
	if err != nil {
		t.Fatal(err)
	}
	outbox.mu.Lock()
	row := &outbox.rows[0].item
	row.Payload, row.Checksum, row.LeaseUntil = payload, restored.Checksum, time.Time{}
	outbox.mu.Unlock()
	if _, _, err := pub.Publish(ctx, payload); err != nil {
		t.Fatal(err)
	}
	fail.Store(false)
	if _, err := relay.Pass(ctx); err != nil {
		t.Fatalf("pass = %v, want the store's copy relayed (a duplicate)", err)
	}
	if outbox.Pending() != 0 {
		t.Fatal("row not marked done")
	}
	if got, err := pub.Latest(ctx, "checkout"); err != nil || got.Checksum != restored.Checksum {
		t.Fatalf("latest %+v (%v), want the restored v3", got, err)
	}
}

// TestRelayDropsARowTheStoreNoLongerHas: a relay holds a row whose
// publication failed, and the rules database is reset: marking the row
// done fails with ErrNotFound. The relay drops the row instead of retrying
// it forever.
func TestRelayDropsARowTheStoreNoLongerHas(t *testing.T) {
	ctx := context.Background()
	outbox, _, relay, fail := relayHoldingCheckoutV3(t)
	outbox.mu.Lock()
	outbox.rows = nil // the database is reset
	outbox.mu.Unlock()
	fail.Store(false)
	for i := range 3 {
		if _, err := relay.Pass(ctx); err != nil {
			t.Fatalf("pass %d: %v, want the row the store lost dropped", i, err)
		}
	}
	relay.mu.Lock()
	held := len(relay.retry)
	relay.mu.Unlock()
	if held != 0 {
		t.Fatalf("%d rows still held for a retry", held)
	}
}

// unreachableKV fails every read at once while down is set, as a bucket
// whose server does not answer (each read would wait for the publisher's
// timeout), and counts the reads tried.
type unreachableKV struct {
	jetstream.KeyValue
	down  atomic.Bool
	tries atomic.Int64
}

func (u *unreachableKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if u.down.Load() {
		u.tries.Add(1)
		return nil, nats.ErrTimeout
	}
	return u.KeyValue.Get(ctx, key)
}

// TestRelayStopsItsPassWhenNATSIsUnreachable: with NATS down, every row of
// a pass would wait for the publisher's timeout (5s), so a batch of 100
// rows kept the relay in one pass for minutes, long after NATS was back.
// The pass stops at the first row that finds NATS unavailable, keeps the
// others, and the next pass publishes them all.
func TestRelayStopsItsPassWhenNATSIsUnreachable(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(1000, 0))
	outbox := NewMemoryOutbox(clk)
	pub := newTestPublisher(t, embedded(t).URL())
	kv := &unreachableKV{KeyValue: pub.kv}
	pub.kv = kv
	relay, err := NewRelay(RelayOptions{Outbox: outbox, Publisher: pub, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := outbox.Add(envelope(t, fmt.Sprintf("svc-%d", i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	kv.down.Store(true)
	if n, err := relay.Pass(ctx); n != 10 || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("pass with NATS down: %d rows, %v; want 10 claimed, ErrUnavailable", n, err)
	}
	if got := kv.tries.Load(); got != 1 {
		t.Fatalf("%d reads of the bucket while NATS is unreachable, want 1", got)
	}
	kv.down.Store(false)
	if _, err := relay.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if n := outbox.Pending(); n != 0 {
		t.Fatalf("%d rows pending after NATS came back, want none", n)
	}
}

// restoreWithRowOne replaces the outbox with a restored one whose row 1 is
// billing v1 (with the given payload), claimed by another relay.
func restoreWithRowOne(t *testing.T, outbox *MemoryOutbox) {
	t.Helper()
	outbox.mu.Lock()
	outbox.rows, outbox.nextID = nil, 0
	outbox.mu.Unlock()
	if _, err := outbox.Add(envelope(t, "billing", 1)); err != nil {
		t.Fatal(err)
	}
	if got, err := outbox.ClaimOutbox(context.Background(), 10, time.Minute); err != nil || len(got) != 1 || got[0].ID != 1 {
		t.Fatalf("claim of the restored row %+v, %v", got, err)
	}
}

// TestRelayDoesNotMarkDoneARowRestoredUnderTheSameID: a relay holds row 1
// (checkout v3) when the rules database is restored from a backup whose
// row 1 is billing v1, which another relay claimed. The relay publishes
// checkout v3 and does not mark row 1 done: billing v1 was never
// delivered.
func TestRelayDoesNotMarkDoneARowRestoredUnderTheSameID(t *testing.T) {
	ctx := context.Background()
	outbox, pub, relay, fail := relayHoldingCheckoutV3(t)
	restoreWithRowOne(t, outbox)
	fail.Store(false)
	_, _ = relay.Pass(ctx)
	if outbox.Pending() != 1 {
		t.Fatal("billing v1 marked done by the relay that published checkout v3")
	}
	if got, err := pub.Latest(ctx, "billing"); err != nil || got != nil {
		t.Fatalf("billing in the bucket: %+v, %v", got, err)
	}
}

// TestRelayDoesNotRecordUndeliverableARowRestoredUnderTheSameID: a relay
// holds row 1 (checkout v3, with a payload that is not its envelope) when
// the rules database is restored with billing v1 as row 1. The relay gives
// up on checkout v3 without recording billing v1 as undeliverable.
func TestRelayDoesNotRecordUndeliverableARowRestoredUnderTheSameID(t *testing.T) {
	ctx := context.Background()
	outbox, _, relay, fail := relayHoldingCheckoutV3(t)
	outbox.mu.Lock()
	outbox.rows[0].item.Payload = json.RawMessage(`{"service":"checkout"}`)
	relay.retry[0].item.Payload = outbox.rows[0].item.Payload
	outbox.mu.Unlock()
	restoreWithRowOne(t, outbox)
	fail.Store(false)
	_, _ = relay.Pass(ctx)
	fs, err := outbox.OutboxFailures(ctx, versioning.FailureFilter{})
	if err != nil || len(fs) != 0 {
		t.Fatalf("failures %+v, %v: the restored billing v1 recorded undeliverable", fs, err)
	}
}
