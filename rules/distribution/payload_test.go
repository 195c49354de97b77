package distribution

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/internal/natsembed"
	"governor.dev/governor/internal/testenv"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/sdk/watch"
)

// sizedEnvelope returns a valid envelope of service at version v whose JSON
// encoding is exactly size bytes (padded through an exempt path).
func sizedEnvelope(t testing.TB, service string, v int64, size int) (*rules.Envelope, []byte) {
	t.Helper()
	build := func(pad int) (*rules.Envelope, []byte) {
		rs := &rules.Ruleset{Service: service, Routes: []rules.Route{{
			Name: "api", Match: rules.Match{PathPrefix: "/"}, RateLimit: &rules.RateLimit{Rate: 10},
			Exempt: &rules.Exempt{Paths: []string{"/" + strings.Repeat("x", pad)}},
		}}}
		env, err := rules.NewEnvelope(v, rs)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(env)
		if err != nil {
			t.Fatal(err)
		}
		return env, b
	}
	_, b := build(0)
	if size < len(b) {
		t.Fatalf("%d bytes is below the smallest padded envelope (%d)", size, len(b))
	}
	env, b := build(size - len(b))
	if len(b) != size {
		t.Fatalf("envelope of %d bytes, want %d", len(b), size)
	}
	return env, b
}

// smallServer starts an embedded NATS server whose max_payload is 64 KiB.
func smallServer(t testing.TB) (*natsembed.Server, int) {
	t.Helper()
	const maxPayload = 64 << 10
	s, err := natsembed.Start(natsembed.Options{MaxPayload: maxPayload})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, maxPayload
}

func gaugeValue(t testing.TB, reg *prometheus.Registry, name string) float64 {
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
	t.Fatalf("no gauge %s", name)
	return 0
}

// TestPublishRefusesWhatTheServerCannotTake: on a server with a 64 KiB
// max_payload, an envelope of exactly max_payload - KVHeaderRoom bytes is
// published and one byte more is refused before anything is written, with
// an error naming the service, version, size and limit. The same holds for a
// canary record.
func TestPublishRefusesWhatTheServerCannotTake(t *testing.T) {
	srv, maxPayload := smallServer(t)
	ctx := context.Background()
	pub := newTestPublisher(t, srv.URL())
	limit := maxPayload - KVHeaderRoom
	if got := pub.MaxValueBytes(); got != limit {
		t.Fatalf("MaxValueBytes = %d, want %d", got, limit)
	}

	_, fits := sizedEnvelope(t, "checkout", 1, limit)
	if out, _, err := pub.Publish(ctx, fits); err != nil || out != Published {
		t.Fatalf("publish of %d bytes (the limit) = %v, %v", len(fits), out, err)
	}
	_, over := sizedEnvelope(t, "checkout", 2, limit+1)
	_, _, err := pub.Publish(ctx, over)
	var tl *TooLargeError
	if !errors.As(err, &tl) || !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("publish of limit+1 bytes: %v, want a *TooLargeError (ErrTooLarge, ErrInvalid)", err)
	}
	if tl.Service != "checkout" || tl.Version != 2 || tl.Size != limit+1 || tl.Limit != limit || tl.MaxPayload != int64(maxPayload) {
		t.Fatalf("error %+v", tl)
	}
	for _, want := range []string{"checkout", "version 2", "65025 bytes", "at most 65024", "max_payload of 65536"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not say %q", err, want)
		}
	}
	if h := history(t, pub, "checkout"); len(h) != 1 {
		t.Fatalf("%d writes, want only the one that fits", len(h))
	}

	// A canary record adds its selector around the envelope.
	_, canary := sizedEnvelope(t, "checkout", 3, limit-30) // the record adds 39 bytes
	if _, err := pub.StartCanary(ctx, canary, watch10()); !errors.As(err, &tl) || tl.Key != pub.Names().CanaryKey("checkout") {
		t.Fatalf("canary over the limit: %v, want a *TooLargeError for the canary key", err)
	}
	_, small := sizedEnvelope(t, "checkout", 3, limit-200)
	if _, err := pub.StartCanary(ctx, small, watch10()); err != nil {
		t.Fatalf("canary within the limit: %v", err)
	}
}

// TestRelayGivesUpOnAVersionTooLargeForTheServer: the relay records a
// version the server cannot take once in the outbox (metric, log naming
// service, version, size and limit, Undeliverable, OnUndeliverable), does
// not retry it, and the outbox never hands the row out again; a newer
// version of the service that is published supersedes it (kept as
// history).
func TestRelayGivesUpOnAVersionTooLargeForTheServer(t *testing.T) {
	srv, maxPayload := smallServer(t)
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(1000, 0))
	outbox := NewMemoryOutbox(clk)
	pub := newTestPublisher(t, srv.URL())
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	var hooked []Undeliverable
	relay, err := NewRelay(RelayOptions{Outbox: outbox, Publisher: pub, Clock: clk, Registerer: reg, Name: "relay-a",
		Logger:          slog.New(slog.NewJSONHandler(&logs, nil)),
		OnUndeliverable: func(_ context.Context, u Undeliverable) { hooked = append(hooked, u) }})
	if err != nil {
		t.Fatal(err)
	}
	limit := maxPayload - KVHeaderRoom
	big, _ := sizedEnvelope(t, "checkout", 1, limit+1)
	id, err := outbox.Add(big)
	if err != nil {
		t.Fatal(err)
	}

	if n, err := relay.Pass(ctx); n != 1 || !errors.Is(err, ErrTooLarge) {
		t.Fatalf("first pass: %d rows, %v; want 1 row, ErrTooLarge", n, err)
	}
	want := Undeliverable{OutboxID: id, Service: "checkout", Version: 1, Reason: ReasonTooLarge, Size: limit + 1, Limit: limit,
		At: clk.Now(), Relay: "relay-a"}
	got, err := relay.Undeliverable(ctx, "")
	if err != nil || len(got) != 1 || len(hooked) != 1 {
		t.Fatalf("undeliverable %+v (%v), hook %+v", got, err, hooked)
	}
	if got[0].Error == "" || !strings.Contains(got[0].Error, "max_payload") {
		t.Fatalf("error %q", got[0].Error)
	}
	got[0].Error = ""
	if got[0] != want {
		t.Fatalf("undeliverable %+v, want %+v", got[0], want)
	}
	checkOnce := func(when string) {
		t.Helper()
		if v := counterValue(t, reg, "governor_distribution_relay_rows_total", "outcome", "undeliverable"); v != 1 {
			t.Fatalf("%s: rows{undeliverable} = %v, want 1", when, v)
		}
		if v := counterValue(t, reg, "governor_distribution_relay_failures_total", "stage", "publish"); v != 0 {
			t.Fatalf("%s: failures{publish} = %v, want 0 (not a failure to retry)", when, v)
		}
		if v := gaugeValue(t, reg, "governor_distribution_relay_undeliverable_rows"); v != 1 {
			t.Fatalf("%s: undeliverable_rows = %v, want 1", when, v)
		}
		if n := strings.Count(logs.String(), `"level":"ERROR"`); n != 1 {
			t.Fatalf("%s: %d error lines, want 1:\n%s", when, n, logs.String())
		}
		if outbox.Pending() != 1 {
			t.Fatalf("%s: the row was marked done", when)
		}
	}
	checkOnce("after the first pass")
	var line map[string]any
	if err := json.Unmarshal([]byte(strings.SplitN(logs.String(), "\n", 2)[0]), &line); err != nil {
		t.Fatal(err)
	}
	if line["service"] != "checkout" || line["version"] != 1.0 || line["size"] != float64(limit+1) ||
		line["limit"] != float64(limit) || line["reason"] != ReasonTooLarge {
		t.Fatalf("log line %v", line)
	}

	// Not retried within the lease, not claimed again after it.
	if n, err := relay.Pass(ctx); n != 0 || err != nil {
		t.Fatalf("pass within the lease: %d rows, %v; want nothing", n, err)
	}
	clk.Advance(31 * time.Second)
	if n, err := relay.Pass(ctx); n != 0 || err != nil {
		t.Fatalf("pass after the lease: %d rows, %v; want nothing claimed", n, err)
	}
	checkOnce("after the lease")
	if h := history(t, pub, "checkout"); len(h) != 0 {
		t.Fatalf("%d values written, want none", len(h))
	}

	// A newer version that fits supersedes it.
	if _, err := outbox.Add(envelope(t, "checkout", 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := relay.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if latest, err := pub.Latest(ctx, "checkout"); err != nil || latest.Version != 2 {
		t.Fatalf("latest %v, %v", latest, err)
	}
	if u, err := relay.Undeliverable(ctx, "checkout"); err != nil || len(u) != 0 {
		t.Fatalf("undeliverable %+v, %v; want none after v2", u, err)
	}
	hist, err := outbox.OutboxFailures(ctx, versioning.FailureFilter{History: true})
	if err != nil || len(hist) != 1 || hist[0].SupersededBy != 2 {
		t.Fatalf("history %+v, %v; want v1 superseded by v2", hist, err)
	}
	if v := gaugeValue(t, reg, "governor_distribution_relay_undeliverable_rows"); v != 0 {
		t.Fatalf("undeliverable_rows = %v, want 0", v)
	}
}

// TestRelayRequeuesWhatALargerServerAccepts: a row given up on as too large
// is requeued by a relay whose server accepts it (a restart after raising
// max_payload) and published; one that is still too large stays.
func TestRelayRequeuesWhatALargerServerAccepts(t *testing.T) {
	small, maxPayload := smallServer(t)
	ctx := context.Background()
	outbox := NewMemoryOutbox(nil)
	limit := maxPayload - KVHeaderRoom
	big, _ := sizedEnvelope(t, "checkout", 1, limit+1)
	if _, err := outbox.Add(big); err != nil {
		t.Fatal(err)
	}
	huge, _ := sizedEnvelope(t, "search", 1, 2<<20)
	if _, err := outbox.Add(huge); err != nil {
		t.Fatal(err)
	}
	first, err := NewRelay(RelayOptions{Outbox: outbox, Publisher: newTestPublisher(t, small.URL()), Name: "small"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Pass(ctx); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("pass on the small server = %v, want ErrTooLarge", err)
	}
	if u, _ := first.Undeliverable(ctx, ""); len(u) != 2 {
		t.Fatalf("undeliverable %+v, want both", u)
	}

	pub := newTestPublisher(t, embedded(t).URL())
	var logs bytes.Buffer
	second, err := NewRelay(RelayOptions{Outbox: outbox, Publisher: pub, Name: "large",
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := second.Pass(ctx); n != 1 || err != nil {
		t.Fatalf("pass on the larger server: %d rows, %v; want checkout requeued and claimed, search left alone", n, err)
	}
	if latest, err := pub.Latest(ctx, "checkout"); err != nil || latest.Version != 1 {
		t.Fatalf("checkout latest %v, %v; want v1 published", latest, err)
	}
	if !strings.Contains(logs.String(), "requeued") {
		t.Fatalf("no requeue logged:\n%s", logs.String())
	}
	u, err := second.Undeliverable(ctx, "")
	if err != nil || len(u) != 1 || u[0].Service != "search" || u[0].Relay != "small" {
		t.Fatalf("undeliverable %+v, %v; want search only, as the small relay recorded it", u, err)
	}
	hist, err := outbox.OutboxFailures(ctx, versioning.FailureFilter{Service: "checkout", History: true})
	if err != nil || len(hist) != 1 || hist[0].RequeuedBy != "large" || hist[0].SupersededBy != 0 {
		t.Fatalf("checkout history %+v, %v", hist, err)
	}
}

// listingOutbox counts the reads of failure rows (OutboxFailures).
type listingOutbox struct {
	*MemoryOutbox
	lists int
}

func (o *listingOutbox) OutboxFailures(ctx context.Context, f versioning.FailureFilter) ([]versioning.OutboxFailure, error) {
	o.lists++
	return o.MemoryOutbox.OutboxFailures(ctx, f)
}

// TestRelayUndeliverableBeyondAThousand: with more open failures than a list
// returns (1,000), the gauge counts them all, a row the server accepts is
// requeued however many newer failures there are, and a pass reads failure
// rows only when looking for rows to requeue (once per server limit), never
// to count them.
func TestRelayUndeliverableBeyondAThousand(t *testing.T) {
	srv, maxPayload := smallServer(t)
	ctx := context.Background()
	limit := maxPayload - KVHeaderRoom
	outbox := &listingOutbox{MemoryOutbox: NewMemoryOutbox(nil)}
	fail := func(service string, size int) {
		t.Helper()
		id, err := outbox.Add(envelope(t, service, 1))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok, err := outbox.MarkOutboxUndeliverable(ctx, id, versioning.OutboxFailure{Reason: ReasonTooLarge,
			Error: "too large", Size: size, Limit: size - 1, Relay: "smaller"}); !ok || err != nil {
			t.Fatalf("record %s: %v, %v", service, ok, err)
		}
	}
	// The oldest row fits this server exactly; the 1,001 after it never will.
	fail("fits", limit)
	const big = 1001
	for i := range big {
		fail(fmt.Sprintf("big-%d", i), limit+1)
	}
	pub := newTestPublisher(t, srv.URL())
	reg := prometheus.NewRegistry()
	relay, err := NewRelay(RelayOptions{Outbox: outbox, Publisher: pub, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := relay.Pass(ctx); n != 1 || err != nil {
		t.Fatalf("first pass: %d rows claimed, %v; want the fitting row requeued and claimed", n, err)
	}
	if latest, err := pub.Latest(ctx, "fits"); err != nil || latest.Version != 1 {
		t.Fatalf("fits latest %v, %v; want v1 published", latest, err)
	}
	if v := gaugeValue(t, reg, "governor_distribution_relay_undeliverable_rows"); v != big {
		t.Fatalf("undeliverable_rows = %v, want %d", v, big)
	}
	if outbox.lists != 1 {
		t.Fatalf("the first pass read failure rows %d times, want once (the rows that fit)", outbox.lists)
	}
	for range 3 {
		if n, err := relay.Pass(ctx); n != 0 || err != nil {
			t.Fatalf("pass: %d rows, %v; want nothing", n, err)
		}
	}
	if outbox.lists != 1 {
		t.Fatalf("later passes read failure rows (%d reads in all); a count is enough", outbox.lists)
	}
	if v := gaugeValue(t, reg, "governor_distribution_relay_undeliverable_rows"); v != big {
		t.Fatalf("undeliverable_rows = %v, want %d", v, big)
	}
}

// TestLargestValidRulesetFitsADefaultServer: a ruleset of exactly
// rules.MaxBytes (the most a store accepts) for a service with the longest
// name, at the largest version, is relayed to a server with the default
// max_payload, staged as a canary too, and an SDK instance decodes it.
func TestLargestValidRulesetFitsADefaultServer(t *testing.T) {
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			url := srv.start(t)
			ctx := context.Background()
			pub := newTestPublisher(t, url)
			if pub.MaxValueBytes() < rules.DefaultMaxPayload-KVHeaderRoom {
				testenv.Unavailable(t, "a NATS server with the default max_payload (this one has %d)", pub.MaxValueBytes()+KVHeaderRoom)
			}
			service := strings.Repeat("s", rules.MaxNameLen)
			pad := 0
			var env *rules.Envelope
			for range 2 {
				rs := &rules.Ruleset{Service: service, Routes: []rules.Route{{
					Name: "api", Match: rules.Match{PathPrefix: "/"}, RateLimit: &rules.RateLimit{Rate: 10},
					Exempt: &rules.Exempt{Paths: []string{"/" + strings.Repeat("x", pad)}},
				}}}
				c, err := rs.Canonical()
				if err != nil {
					t.Fatal(err)
				}
				pad += rules.MaxBytes - len(c)
				if env, err = rules.NewEnvelope(math.MaxInt64, rs); err != nil {
					t.Fatal(err)
				}
			}
			if c, _ := env.Ruleset.Canonical(); len(c) != rules.MaxBytes {
				t.Fatalf("canonical %d bytes, want %d", len(c), rules.MaxBytes)
			}
			outbox := NewMemoryOutbox(nil)
			if _, err := outbox.Add(env); err != nil {
				t.Fatal(err)
			}
			relay, err := NewRelay(RelayOptions{Outbox: outbox, Publisher: pub})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := relay.Pass(ctx); err != nil || outbox.Pending() != 0 {
				t.Fatalf("relay of the largest ruleset: %v (pending %d)", err, outbox.Pending())
			}
			e, err := pub.kv.Get(ctx, pub.Names().StableKey(service))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := rules.DecodeEnvelope(e.Value()); err != nil || len(e.Value()) > watch.DefaultOptions().MaxBytes {
				t.Fatalf("the stored envelope (%d bytes) does not decode within the watcher's limit: %.200v", len(e.Value()), err)
			}
			// Staged as a canary instead, with a selector, it fits as well.
			if err := pub.kv.Delete(ctx, pub.Names().StableKey(service)); err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(env)
			sel := watch.Selector{Percent: 12.5, Labels: map[string]string{"zone": "eu-west-1a", "track": "canary"}}
			if _, err := pub.StartCanary(ctx, b, sel); err != nil {
				t.Fatalf("canary of the largest ruleset: %v", err)
			}
			c, err := pub.kv.Get(ctx, pub.Names().CanaryKey(service))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := watch.DecodeCanary(c.Value()); err != nil || len(c.Value()) > watch.DefaultOptions().MaxBytes {
				t.Fatalf("the stored canary (%d bytes) does not decode within the watcher's limit: %.200v", len(c.Value()), err)
			}
		})
	}
}

// flakyOutbox fails MarkOutboxUndeliverable while fail is above zero.
type flakyOutbox struct {
	*MemoryOutbox
	fail int
}

func (o *flakyOutbox) MarkOutboxUndeliverable(ctx context.Context, id int64, f versioning.OutboxFailure) (versioning.OutboxFailure, bool, error) {
	if o.fail > 0 {
		o.fail--
		return versioning.OutboxFailure{}, false, fmt.Errorf("%w: database restarting", versioning.ErrUnavailable)
	}
	return o.MemoryOutbox.MarkOutboxUndeliverable(ctx, id, f)
}

// MarkOutboxItemUndeliverable is the relay's way in (ItemMarker); it fails
// as MarkOutboxUndeliverable does.
func (o *flakyOutbox) MarkOutboxItemUndeliverable(ctx context.Context, it versioning.OutboxItem, f versioning.OutboxFailure) (versioning.OutboxFailure, bool, error) {
	if o.fail > 0 {
		return o.MarkOutboxUndeliverable(ctx, it.ID, f)
	}
	return o.MemoryOutbox.MarkOutboxItemUndeliverable(ctx, it, f)
}

// TestRelayKeepsARowItCouldNotRecord: when the store cannot record a row as
// undeliverable, the relay keeps the row and records it on its next pass;
// nothing is reported before the record exists.
func TestRelayKeepsARowItCouldNotRecord(t *testing.T) {
	srv, maxPayload := smallServer(t)
	ctx := context.Background()
	outbox := &flakyOutbox{MemoryOutbox: NewMemoryOutbox(nil), fail: 1}
	big, _ := sizedEnvelope(t, "checkout", 1, maxPayload)
	if _, err := outbox.Add(big); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	hooked := 0
	relay, err := NewRelay(RelayOptions{Outbox: outbox, Publisher: newTestPublisher(t, srv.URL()), Registerer: reg,
		OnUndeliverable: func(context.Context, Undeliverable) { hooked++ }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := relay.Pass(ctx); !errors.Is(err, versioning.ErrUnavailable) {
		t.Fatalf("first pass = %v, want the store's error", err)
	}
	if u, _ := relay.Undeliverable(ctx, ""); len(u) != 0 || hooked != 0 {
		t.Fatalf("undeliverable %+v, hook %d: nothing before the record exists", u, hooked)
	}
	if v := counterValue(t, reg, "governor_distribution_relay_failures_total", "stage", "mark"); v != 1 {
		t.Fatalf("failures{mark} = %v, want 1", v)
	}
	if n, err := relay.Pass(ctx); n != 0 || !errors.Is(err, ErrTooLarge) {
		t.Fatalf("second pass: %d rows claimed, %v; want the kept row tried again (ErrTooLarge), nothing claimed", n, err)
	}
	if u, _ := relay.Undeliverable(ctx, ""); len(u) != 1 || hooked != 1 {
		t.Fatalf("undeliverable %+v, hook %d; want it recorded once", u, hooked)
	}
	if n, err := relay.Pass(ctx); n != 0 || err != nil {
		t.Fatalf("third pass: %d rows, %v; want nothing", n, err)
	}
}

func TestNewRelayRefusesALongName(t *testing.T) {
	pub := newTestPublisher(t, embedded(t).URL())
	_, err := NewRelay(RelayOptions{Outbox: NewMemoryOutbox(nil), Publisher: pub, Name: strings.Repeat("r", versioning.MaxFailureRelayBytes+1)})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "Name") {
		t.Fatalf("err = %v, want ErrInvalid naming Name", err)
	}
	r, err := NewRelay(RelayOptions{Outbox: NewMemoryOutbox(nil), Publisher: pub})
	if err != nil || !strings.Contains(r.o.Name, "/") {
		t.Fatalf("default name %q, %v; want <host>/<pid>", r.o.Name, err)
	}
}
