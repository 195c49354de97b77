package distribution

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/internal/natsembed"
	"governor.dev/governor/internal/testenv"
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
func smallServer(t *testing.T) (*natsembed.Server, int) {
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
// version the server cannot take once (metric, log naming service, version,
// size and limit, Undeliverable, OnUndeliverable), does not retry it, skips
// the row when a claim returns it after its lease, and marks it done as
// superseded once a newer version of the service is published.
func TestRelayGivesUpOnAVersionTooLargeForTheServer(t *testing.T) {
	srv, maxPayload := smallServer(t)
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(1000, 0))
	outbox := NewMemoryOutbox(clk)
	pub := newTestPublisher(t, srv.URL())
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	var hooked []Undeliverable
	relay, err := NewRelay(RelayOptions{Outbox: outbox, Publisher: pub, Clock: clk, Registerer: reg,
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
	want := Undeliverable{OutboxID: id, Service: "checkout", Version: 1, Reason: ReasonTooLarge, Size: limit + 1, Limit: limit, At: clk.Now()}
	got := relay.Undeliverable()
	if len(got) != 1 || len(hooked) != 1 {
		t.Fatalf("undeliverable %+v, hook %+v", got, hooked)
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

	// Not retried within the lease, skipped when claimed again after it.
	if n, err := relay.Pass(ctx); n != 0 || err != nil {
		t.Fatalf("pass within the lease: %d rows, %v; want nothing", n, err)
	}
	clk.Advance(31 * time.Second)
	if n, err := relay.Pass(ctx); n != 1 || err != nil {
		t.Fatalf("pass after the lease: %d rows, %v; want the row claimed and skipped", n, err)
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
	if outbox.Pending() != 0 || len(relay.Undeliverable()) != 0 {
		t.Fatalf("pending %d, undeliverable %+v; want the big row done as superseded", outbox.Pending(), relay.Undeliverable())
	}
	if v := counterValue(t, reg, "governor_distribution_relay_rows_total", "outcome", "superseded"); v != 1 {
		t.Fatalf("rows{superseded} = %v, want 1", v)
	}
	if v := gaugeValue(t, reg, "governor_distribution_relay_undeliverable_rows"); v != 0 {
		t.Fatalf("undeliverable_rows = %v, want 0", v)
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
