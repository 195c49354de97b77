package distribution

import (
	"context"
	"errors"
	"testing"

	"governor.dev/governor/sdk/watch"
)

// PromoteVersion and AbortVersion act only on the version the caller looked
// at: with another version staged they change nothing and say which
// version is staged.
func TestPromoteAndAbortVersionRefuseAnotherStagedVersion(t *testing.T) {
	ctx := context.Background()
	pub := newTestPublisher(t, embedded(t).URL())
	if _, err := pub.StartCanary(ctx, payloadOf(t, "checkout", 3), watch10()); err != nil {
		t.Fatal(err)
	}
	if env, err := pub.PromoteVersion(ctx, "checkout", 2); !errors.Is(err, ErrStale) || !errors.Is(err, ErrInvalid) || env != nil {
		t.Fatalf("promote v2 while v3 is staged = %v, %v; want ErrStale and ErrInvalid", env, err)
	}
	if env, err := pub.AbortVersion(ctx, "checkout", 2); !errors.Is(err, ErrStale) || env != nil {
		t.Fatalf("abort v2 while v3 is staged = %v, %v; want ErrStale", env, err)
	}
	if v := stableVersion(t, pub, "checkout"); v != 0 {
		t.Fatalf("stable v%d, want nothing promoted", v)
	}
	if v := canaryVersion(t, pub, "checkout"); v != 3 {
		t.Fatalf("canary v%d, want v3 still staged", v)
	}
	if _, err := pub.PromoteVersion(ctx, "checkout", 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("promote of version 0: %v, want ErrInvalid", err)
	}
	if env, err := pub.PromoteVersion(ctx, "checkout", 3); err != nil || env.Version != 3 {
		t.Fatalf("promote v3 = %v, %v; want v3", env, err)
	}
	if v := stableVersion(t, pub, "checkout"); v != 3 {
		t.Fatalf("stable v%d, want v3", v)
	}
	if _, err := pub.AbortVersion(ctx, "checkout", 3); !errors.Is(err, ErrNoCanary) {
		t.Fatalf("abort with nothing staged: %v, want ErrNoCanary", err)
	}
}

// A canary replaced after PromoteVersion read the expected one is not
// promoted in its place: the version read is promoted, the newer one stays
// staged.
func TestPromoteVersionPromotesOnlyTheRecordItChecked(t *testing.T) {
	ctx := context.Background()
	pub := newTestPublisher(t, embedded(t).URL())
	if _, err := pub.StartCanary(ctx, payloadOf(t, "checkout", 3), watch10()); err != nil {
		t.Fatal(err)
	}
	pub.kv = &hookKV{KeyValue: pub.kv, key: pub.names.CanaryKey("checkout"), then: func() {
		if _, err := pub.StartCanary(ctx, payloadOf(t, "checkout", 4), watch10()); err != nil {
			t.Errorf("stage v4: %v", err)
		}
	}}
	if env, err := pub.PromoteVersion(ctx, "checkout", 3); err != nil || env.Version != 3 {
		t.Fatalf("promote v3 = %v, %v; want v3", env, err)
	}
	if v := stableVersion(t, pub, "checkout"); v != 3 {
		t.Fatalf("stable v%d, want v3", v)
	}
	if v := canaryVersion(t, pub, "checkout"); v != 4 {
		t.Fatalf("canary v%d, want v4 (staged during the promotion)", v)
	}
}

// SetCanarySelector widens the running canary of a version (the 10 % to
// 50 % step of a progressive rollout), which StartCanary, strict for the
// relay, refuses; it never touches another version's canary nor brings
// back one withdrawn meanwhile.
func TestSetCanarySelectorChangesOnlyTheRunningVersion(t *testing.T) {
	ctx := context.Background()
	pub := newTestPublisher(t, embedded(t).URL())
	if _, err := pub.SetCanarySelector(ctx, "checkout", 5, watch.Selector{Percent: 50}); !errors.Is(err, ErrNoCanary) {
		t.Fatalf("with nothing staged: %v, want ErrNoCanary", err)
	}
	if _, err := pub.StartCanary(ctx, payloadOf(t, "checkout", 5), watch10()); err != nil {
		t.Fatal(err)
	}
	if _, err := pub.StartCanary(ctx, payloadOf(t, "checkout", 5), watch.Selector{Percent: 50}); !errors.Is(err, ErrStale) {
		t.Fatalf("StartCanary of the running version: %v, want ErrStale (the relay relies on it)", err)
	}
	if env, err := pub.SetCanarySelector(ctx, "checkout", 5, watch.Selector{Percent: 50}); err != nil || env.Version != 5 {
		t.Fatalf("widen v5 = %v, %v; want v5", env, err)
	}
	c, err := pub.Canary(ctx, "checkout")
	if err != nil || c.Envelope.Version != 5 || c.Selector.Percent != 50 {
		t.Fatalf("canary = %+v, %v; want v5 at 50 %%", c, err)
	}
	if _, err := pub.SetCanarySelector(ctx, "checkout", 4, watch.Selector{Percent: 20}); !errors.Is(err, ErrStale) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("v4 while v5 runs: %v, want ErrStale and ErrInvalid", err)
	}
	if _, err := pub.SetCanarySelector(ctx, "checkout", 5, watch.Selector{Percent: 101}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("percent 101: %v, want ErrInvalid", err)
	}

	// The operator aborts v5 and v6 is staged after SetCanarySelector read v5.
	pub.kv = &hookKV{KeyValue: pub.kv, key: pub.names.CanaryKey("checkout"), then: func() {
		if _, err := pub.Abort(ctx, "checkout"); err != nil {
			t.Errorf("abort v5: %v", err)
		}
		if _, err := pub.StartCanary(ctx, payloadOf(t, "checkout", 6), watch10()); err != nil {
			t.Errorf("stage v6: %v", err)
		}
	}}
	if _, err := pub.SetCanarySelector(ctx, "checkout", 5, watch.Selector{Percent: 80}); !errors.Is(err, ErrStale) {
		t.Fatalf("widen v5 after it was replaced: %v, want ErrStale", err)
	}
	c, err = pub.Canary(ctx, "checkout")
	if err != nil || c.Envelope.Version != 6 || c.Selector.Percent != 10 {
		t.Fatalf("canary = %+v, %v; want v6 at 10 %% untouched", c, err)
	}
}
