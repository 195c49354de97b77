package distribution

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"governor.dev/governor/sdk/watch"
)

func TestApproveReachesEveryWatcherAndIsACKed(t *testing.T) {
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			url := srv.start(t)
			p := newPlane(t, url)
			var sdks []*sdk
			for i := range 5 {
				sdks = append(sdks, startSDK(t, url, p.names, "checkout", sdkOpts{instance: fmt.Sprintf("pod-%d", i)}))
			}
			p.approve(t, "checkout", 1)
			p.approve(t, "checkout", 2)
			for i, s := range sdks {
				eventually(t, fmt.Sprintf("pod-%d applies v2", i), func() bool { return s.app.last() == 2 })
			}
			eventually(t, "every instance SYNCED on v2 with an ACK", func() bool {
				ins, _ := p.ledger.Instances(context.Background(), "checkout")
				n := 0
				for _, in := range ins {
					if in.State == StateSynced && in.Running == 2 && in.AckVersion == 2 {
						n++
					}
				}
				return n == 5
			})
			if p.outbox.Pending() != 0 {
				t.Fatalf("%d outbox rows left", p.outbox.Pending())
			}
		})
	}
}

func TestNACKRecordsTheErrorAndKeepsTheOldRules(t *testing.T) {
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			url := srv.start(t)
			p := newPlane(t, url)
			s := startSDK(t, url, p.names, "checkout", sdkOpts{instance: "pod-0", refuse: map[int64]bool{2: true}, maxBytes: 4096})
			p.approve(t, "checkout", 1)
			eventually(t, "v1 applied", func() bool { return s.app.last() == 1 })

			p.approve(t, "checkout", 2)
			eventually(t, "NACK of v2 recorded", func() bool {
				in := instanceOf(t, p, "checkout", "pod-0")
				return in.State == StateNacked && in.NackVersion == 2 && strings.Contains(in.NackError, "refused by the test")
			})

			// Bad values written straight to the bucket, as a broken or
			// hostile publisher would.
			js, _ := jetstream.New(p.nc)
			kv, err := js.KeyValue(context.Background(), p.names.Bucket())
			if err != nil {
				t.Fatal(err)
			}
			good, _ := json.Marshal(envelope(t, "checkout", 3))
			wrongSum := strings.Replace(string(good), `"sha256:`, `"sha256:ff`, 1)
			other, _ := json.Marshal(envelope(t, "payments", 4))
			// Version 5, valid but for a padding field, and over the watcher's
			// 4096-byte limit: refused for its size before anything else.
			big, _ := json.Marshal(envelope(t, "checkout", 5))
			bigBytes := append(big[:len(big)-1], []byte(`,"pad":"`+strings.Repeat("x", 5000)+`"}`)...)
			tests := []struct {
				name    string
				value   []byte
				reason  watch.Reason
				version int64
				mention string
			}{
				{"not JSON", []byte("{{{ not json"), watch.ReasonNotJSON, 0, "not JSON"},
				{"wrong checksum", []byte(wrongSum), watch.ReasonChecksum, 3, "checksum"},
				{"another service", other, watch.ReasonWrongService, 4, `"payments"`},
				{"oversized", bigBytes, watch.ReasonOversized, 5, "at most 4096 allowed"},
			}
			for _, tt := range tests {
				if _, err := kv.Put(context.Background(), p.names.StableKey("checkout"), tt.value); err != nil {
					t.Fatal(err)
				}
				eventually(t, tt.name+" NACKed", func() bool {
					in := instanceOf(t, p, "checkout", "pod-0")
					return in.NackReason == string(tt.reason) && in.NackVersion == tt.version && strings.Contains(in.NackError, tt.mention)
				})
				if got := counterValue(t, s.reg, "governor_sdk_watch_rejected_total", "reason", string(tt.reason)); got < 1 {
					t.Fatalf("%s: rejected{reason=%s} = %v", tt.name, tt.reason, got)
				}
				if s.w.Running() != 1 || s.app.last() != 1 {
					t.Fatalf("%s: running v%d, want the old rules v1", tt.name, s.w.Running())
				}
			}
		})
	}
}

func TestCanaryReachesExactlyTheSelectedInstances(t *testing.T) {
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			url := srv.start(t)
			p := newPlane(t, url)
			sdks := map[string]*sdk{}
			labels := map[string]map[string]string{}
			for i := range 8 {
				id := fmt.Sprintf("pod-%d", i)
				labels[id] = map[string]string{"zone": []string{"a", "b"}[i%2]}
				sdks[id] = startSDK(t, url, p.names, "checkout", sdkOpts{instance: id, labels: labels[id], back: true})
			}
			p.approve(t, "checkout", 1)
			for id, s := range sdks {
				eventually(t, id+" on v1", func() bool { return s.app.last() == 1 })
			}
			ctx := context.Background()
			stage := func(v int64, sel watch.Selector) {
				payload, _ := json.Marshal(envelope(t, "checkout", v))
				env, err := p.pub.StartCanary(ctx, payload, sel)
				if err != nil {
					t.Fatal(err)
				}
				if err := p.ledger.Published(ctx, env, &sel); err != nil {
					t.Fatal(err)
				}
			}
			check := func(what string, want func(id string) int64) {
				for id, s := range sdks {
					eventually(t, fmt.Sprintf("%s: %s on v%d", what, id, want(id)), func() bool { return s.w.Running() == want(id) })
				}
				eventually(t, what+": ledger SYNCED everywhere", func() bool {
					ins, _ := p.ledger.Instances(ctx, "checkout")
					for _, in := range ins {
						if in.State != StateSynced || in.Target != want(in.Instance) {
							return false
						}
					}
					return len(ins) == len(sdks)
				})
			}

			// By label: zone a only.
			byLabel := watch.Selector{Labels: map[string]string{"zone": "a"}}
			stage(2, byLabel)
			check("label canary", func(id string) int64 {
				if labels[id]["zone"] == "a" {
					return 2
				}
				return 1
			})
			// Abort: back to v1 everywhere.
			if _, err := p.pub.Abort(ctx, "checkout"); err != nil {
				t.Fatal(err)
			}
			if err := p.ledger.Aborted(ctx, "checkout"); err != nil {
				t.Fatal(err)
			}
			check("abort", func(string) int64 { return 1 })

			// By percentage: the stable-hash share.
			byShare := watch.Selector{Percent: 50}
			stage(3, byShare)
			selected := 0
			check("percent canary", func(id string) int64 {
				if byShare.Selects("checkout", id, labels[id]) {
					return 3
				}
				return 1
			})
			for id := range sdks {
				if byShare.Selects("checkout", id, labels[id]) {
					selected++
				}
			}
			if selected == 0 || selected == len(sdks) {
				t.Logf("the 50%% share selected %d of %d instances", selected, len(sdks))
			}
			// Promote: everyone on v3.
			env, err := p.pub.Promote(ctx, "checkout")
			if err != nil {
				t.Fatal(err)
			}
			if err := p.ledger.Published(ctx, env, nil); err != nil {
				t.Fatal(err)
			}
			check("promote", func(string) int64 { return 3 })
		})
	}
}

func TestWatcherStartedWhileNATSIsDownRunsOnItsCacheThenCatchesUp(t *testing.T) {
	srv := embedded(t)
	p := newPlane(t, srv.URL())
	cache := filepath.Join(t.TempDir(), "rules.json")
	env, _ := json.Marshal(envelope(t, "checkout", 3))
	if err := watch.SaveCache(cache, env); err != nil {
		t.Fatal(err)
	}
	srv.Stop()

	s := startSDK(t, srv.URL(), p.names, "checkout", sdkOpts{instance: "pod-0", cache: cache})
	if s.w.Running() != 3 || s.app.last() != 3 {
		t.Fatalf("running v%d while NATS is down, want the cached v3", s.w.Running())
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	p.approve(t, "checkout", 4)
	eventually(t, "catch up to v4", func() bool { return s.app.last() == 4 })
	eventually(t, "cache holds v4", func() bool {
		data, err := watch.LoadCache(cache, "checkout")
		return err == nil && data.Version == 4
	})
}

func TestRestartNATSInTheMiddleOfAStreamOf100Versions(t *testing.T) {
	srv := embedded(t)
	p := newPlane(t, srv.URL())
	var sdks []*sdk
	for i := range 4 {
		sdks = append(sdks, startSDK(t, srv.URL(), p.names, "checkout", sdkOpts{instance: fmt.Sprintf("pod-%d", i)}))
	}
	for v := int64(1); v <= 100; v++ {
		p.approve(t, "checkout", v)
		switch {
		case v == 50:
			// Mid-stream: the watchers are applying versions right now.
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
		case v%10 == 0 && v < 50:
			eventually(t, fmt.Sprintf("v%d published", v), func() bool { return p.outbox.Pending() == 0 })
		}
	}
	for i, s := range sdks {
		// recorder fails the test if an older version is applied after a newer one.
		eventually(t, fmt.Sprintf("pod-%d on v100", i), func() bool { return s.app.last() == 100 })
	}
	eventually(t, "outbox drained", func() bool { return p.outbox.Pending() == 0 })
	for i, s := range sdks {
		if n := len(s.app.versions()); n < 2 {
			t.Errorf("pod-%d applied %d versions: the stream did not reach it before the restart", i, n)
		}
	}
	got, err := p.pub.Latest(context.Background(), "checkout")
	if err != nil || got.Version != 100 {
		t.Fatalf("bucket holds %v (%v), want v100", got, err)
	}
}
