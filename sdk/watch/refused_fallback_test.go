package watch

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/sdk/rules"
)

func lastReport(t *testing.T, reports *[]*Report) *Report {
	t.Helper()
	if len(*reports) == 0 {
		t.Fatal("no report")
	}
	return (*reports)[len(*reports)-1]
}

// An instance whose canary is aborted (or replaced by one for other
// instances) while the applier refuses the stable version returns to the
// last stable version it ran, and its heartbeats carry the NACK of the
// stable target. It stayed on the aborted canary for good, and its
// heartbeats said nothing once the canary had cleared the NACK.
func TestAbortedCanaryReturnsToLastGoodStableWhenTheStableIsRefused(t *testing.T) {
	zoneA := Selector{Labels: map[string]string{"zone": "a"}}
	zoneB := Selector{Labels: map[string]string{"zone": "b"}}
	tests := []struct {
		name  string
		steps func(t *testing.T, s *state)
		tried []int64
	}{
		{"stable refused before the canary, canary aborted", func(t *testing.T, s *state) {
			s.onStable(envelopeBytes(t, "checkout", 5))
			s.onCanary(canaryBytes(t, 6, zoneA))
			s.onCanaryGone()
		}, []int64{4, 5, 6, 4}},
		{"stable published while on the canary, canary aborted", func(t *testing.T, s *state) {
			s.onCanary(canaryBytes(t, 6, zoneA))
			s.onStable(envelopeBytes(t, "checkout", 5))
			s.onCanaryGone()
		}, []int64{4, 6, 5, 4}},
		{"stable refused, canary replaced by one for other instances", func(t *testing.T, s *state) {
			s.onStable(envelopeBytes(t, "checkout", 5))
			s.onCanary(canaryBytes(t, 6, zoneA))
			s.onCanary(canaryBytes(t, 7, zoneB))
		}, []int64{4, 5, 6, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, app, reports, _ := newTestState(t, "checkout", "i-1", map[string]string{"zone": "a"})
			app.refuse[5] = true
			s.onStable(envelopeBytes(t, "checkout", 4))
			tt.steps(t, s)
			if got := s.running.Load(); got != 4 {
				t.Fatalf("running v%d, want the last good stable v4", got)
			}
			// A resync delivers nothing new: nothing is retried.
			s.onCanaryGone()
			s.reconcile(0)
			if got := app.attempts(); !slices.Equal(got, tt.tried) {
				t.Fatalf("applier called with %v, want %v", got, tt.tried)
			}
			if v, reason, _ := s.nack(); v != 5 || reason != ReasonApply {
				t.Fatalf("heartbeat NACK (%d, %s), want the NACK of the stable target v5", v, reason)
			}
			if r := lastReport(t, reports); r.Running != 4 {
				t.Fatalf("last report %+v, want running v4", r)
			}
			var nacked bool
			for _, r := range *reports {
				nacked = nacked || (r.Status == StatusNACK && r.Version == 5)
			}
			if !nacked {
				t.Fatalf("no NACK of v5 reported: %+v", *reports)
			}
		})
	}
}

// A canary the applier refuses leaves the instance on the stable version:
// a newer stable version below the canary is applied, and a running canary
// replaced by a refused one is left. Both stayed where they were.
func TestRefusedCanaryLeavesTheInstanceOnTheStableVersion(t *testing.T) {
	zoneA := Selector{Labels: map[string]string{"zone": "a"}}
	tests := []struct {
		name  string
		steps func(t *testing.T, s *state)
		want  int64
	}{
		{"refused canary, then a newer stable below it", func(t *testing.T, s *state) {
			s.onCanary(canaryBytes(t, 7, zoneA))
			s.onStable(envelopeBytes(t, "checkout", 6))
		}, 6},
		{"running canary replaced by a newer one the applier refuses", func(t *testing.T, s *state) {
			s.onCanary(canaryBytes(t, 3, zoneA))
			s.onCanary(canaryBytes(t, 7, zoneA))
		}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, app, _, _ := newTestState(t, "checkout", "i-1", map[string]string{"zone": "a"})
			app.refuse[7] = true
			s.onStable(envelopeBytes(t, "checkout", 1))
			tt.steps(t, s)
			if got := s.running.Load(); got != tt.want {
				t.Fatalf("running v%d, want the stable v%d", got, tt.want)
			}
			if v, reason, _ := s.nack(); v != 7 || reason != ReasonApply {
				t.Fatalf("heartbeat NACK (%d, %s), want the NACK of the canary v7", v, reason)
			}
		})
	}
}

// Two refused versions (stable v5, then canary v6): once the canary is gone
// neither is retried (the single remembered refusal let v5 be tried again)
// and the NACK in heartbeats is that of the target v5, not of the gone v6.
func TestTwoRefusedVersionsAreNeitherRetriedNorHidden(t *testing.T) {
	s, app, reports, _ := newTestState(t, "checkout", "i-1", map[string]string{"zone": "a"})
	app.refuse[5], app.refuse[6] = true, true
	s.onStable(envelopeBytes(t, "checkout", 4))
	s.onStable(envelopeBytes(t, "checkout", 5))
	s.onCanary(canaryBytes(t, 6, Selector{Labels: map[string]string{"zone": "a"}}))
	s.onCanaryGone()
	s.onCanaryGone() // resyncs
	s.onStable(envelopeBytes(t, "checkout", 5))
	if got := app.attempts(); !slices.Equal(got, []int64{4, 5, 6}) {
		t.Fatalf("applier called with %v, want [4 5 6]: a refused version is not retried", got)
	}
	if got := s.running.Load(); got != 4 {
		t.Fatalf("running v%d, want v4", got)
	}
	if v, _, _ := s.nack(); v != 5 {
		t.Fatalf("heartbeat NACK of v%d, want that of the stable target v5 once the canary v6 is gone", v)
	}
	if r := lastReport(t, reports); r.Status != StatusNACK || r.Version != 5 || r.Running != 4 {
		t.Fatalf("last report %+v, want the NACK of v5 running v4", r)
	}
}

// A refused envelope republished identically is not tried again in the same
// process; the same version with other content is; a restarted process
// tries it once more (its configuration may accept it).
func TestRefusedVersionRepublishedIdenticallyIsNotRetried(t *testing.T) {
	s, app, reports, _ := newTestState(t, "checkout", "i-1", nil)
	app.refuse[5] = true
	s.onStable(envelopeBytes(t, "checkout", 4))
	s.onStable(envelopeBytes(t, "checkout", 5))
	s.onStable(envelopeBytes(t, "checkout", 5)) // a new revision, same envelope
	if got := app.attempts(); !slices.Equal(got, []int64{4, 5}) {
		t.Fatalf("applier called with %v, want [4 5]", got)
	}
	if len(*reports) != 2 {
		t.Fatalf("%d reports, want ACK v4 and one NACK v5", len(*reports))
	}
	// The same version with another content is another envelope: tried.
	other, err := rules.NewEnvelope(5, ruleset("checkout", 99))
	if err != nil {
		t.Fatal(err)
	}
	s.onStable(mustJSON(t, other))
	if got := app.attempts(); !slices.Equal(got, []int64{4, 5, 5}) {
		t.Fatalf("applier called with %v, want [4 5 5]", got)
	}
	// A restarted process tries it once more.
	s2, app2, _, _ := newTestState(t, "checkout", "i-1", nil)
	app2.refuse[5] = true
	s2.onStable(envelopeBytes(t, "checkout", 5))
	if got := app2.attempts(); !slices.Equal(got, []int64{5}) {
		t.Fatalf("after a restart the applier was called with %v, want [5]", got)
	}
}

// A refused canary record ends the canary it replaces in the key.
func TestInvalidCanaryRecordEndsTheCanaryItReplaces(t *testing.T) {
	s, _, _, _ := newTestState(t, "checkout", "i-1", map[string]string{"zone": "a"})
	s.onStable(envelopeBytes(t, "checkout", 1))
	s.onCanary(canaryBytes(t, 3, Selector{Labels: map[string]string{"zone": "a"}}))
	s.onCanary([]byte(`{"selector":{"percent":100},"envelope":{"service":"checkout","version":4}}`))
	if got := s.running.Load(); got != 1 {
		t.Fatalf("running v%d, want the stable v1: the key no longer holds the canary v3", got)
	}
	if v, reason, _ := s.nack(); v != 4 || reason != ReasonInvalid {
		t.Fatalf("heartbeat NACK (%d, %s), want the NACK of the invalid record v4", v, reason)
	}
}

// A cached stable version the watch confirms is the fallback after a
// restart.
func TestRestartedInstanceFallsBackToTheCachedStableTheWatchConfirms(t *testing.T) {
	s, app, _, _ := newTestState(t, "checkout", "i-1", map[string]string{"zone": "a"})
	s.cachePath = filepath.Join(t.TempDir(), "rules.json")
	if err := SaveCache(s.cachePath, envelopeBytes(t, "checkout", 4)); err != nil {
		t.Fatal(err)
	}
	app.refuse[5] = true
	s.loadCache()
	s.onStable(envelopeBytes(t, "checkout", 4))
	s.onCanary(canaryBytes(t, 6, Selector{Labels: map[string]string{"zone": "a"}}))
	s.onStable(envelopeBytes(t, "checkout", 5))
	s.onCanaryGone()
	if got := s.running.Load(); got != 4 {
		t.Fatalf("running v%d, want v4", got)
	}
	if got := app.attempts(); !slices.Equal(got, []int64{4, 6, 5, 4}) {
		t.Fatalf("applier called with %v, want [4 6 5 4]", got)
	}
}

// The last good stable version is kept beside the cache while the instance
// runs a canary: restarted on a canary aborted while it was down, with the
// stable target refused, the instance returns to it.
func TestRestartedOnAnAbortedCanaryReturnsToTheLastGoodStableWhenTheStableIsRefused(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "rules.json")
	zoneA := Selector{Labels: map[string]string{"zone": "a"}}
	first, _, _, _ := newTestState(t, "checkout", "i-1", map[string]string{"zone": "a"})
	first.cachePath = cache
	first.onStable(envelopeBytes(t, "checkout", 4))
	first.onCanary(canaryBytes(t, 6, zoneA))
	if first.running.Load() != 6 {
		t.Fatalf("first run on v%d, want the canary v6", first.running.Load())
	}
	// Down: the canary is aborted and v5 published, which this instance refuses.
	s, app, _, _ := newTestState(t, "checkout", "i-1", map[string]string{"zone": "a"})
	s.cachePath = cache
	app.refuse[5] = true
	s.loadCache()
	s.onStable(envelopeBytes(t, "checkout", 5))
	s.onCanaryGone()
	if got := s.running.Load(); got != 4 {
		t.Fatalf("running v%d, want the last good stable v4", got)
	}
	if got := app.attempts(); !slices.Equal(got, []int64{6, 5, 4}) {
		t.Fatalf("applier called with %v, want [6 5 4]", got)
	}
	if v, _, _ := s.nack(); v != 5 {
		t.Fatalf("heartbeat NACK of v%d, want v5", v)
	}
}

// The cached stable version, confirmed by the watch after a restart, is
// kept beside the cache when the instance moves to a canary.
func TestLastGoodStableSurvivesTwoRestarts(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "rules.json")
	zoneA := Selector{Labels: map[string]string{"zone": "a"}}
	if err := SaveCache(cache, envelopeBytes(t, "checkout", 4)); err != nil {
		t.Fatal(err)
	}
	first, _, _, _ := newTestState(t, "checkout", "i-1", map[string]string{"zone": "a"})
	first.cachePath = cache
	first.loadCache()
	first.onStable(envelopeBytes(t, "checkout", 4))
	first.onCanary(canaryBytes(t, 6, zoneA))
	s, app, _, _ := newTestState(t, "checkout", "i-1", map[string]string{"zone": "a"})
	s.cachePath = cache
	app.refuse[5] = true
	s.loadCache()
	s.onStable(envelopeBytes(t, "checkout", 5))
	s.onCanaryGone()
	if got := s.running.Load(); got != 4 {
		t.Fatalf("running v%d, want the last good stable v4", got)
	}
}

// A canary aborted while no valid stable version was known (a bucket
// recreated while NATS was down, a stable value this SDK refused) is left
// as soon as one arrives: the instance stayed on the aborted canary.
func TestCanaryAbortedBeforeAnyStableIsLeftWhenTheStableArrives(t *testing.T) {
	s, _, _, _ := newTestState(t, "checkout", "i-1", map[string]string{"zone": "a"})
	s.onCanaryGone() // the watch's initial values: no canary
	s.onCanary(canaryBytes(t, 2, Selector{Labels: map[string]string{"zone": "a"}}))
	s.onCanaryGone()
	s.onStable(envelopeBytes(t, "checkout", 1))
	if got := s.running.Load(); got != 1 {
		t.Fatalf("running v%d, want the stable v1: the canary v2 is gone", got)
	}
}

// A canary replaced by one for other instances takes its NACK along:
// heartbeats repeat that of the refused stable target instead.
func TestReplacedCanaryNACKGivesWayToTheTargetsNACK(t *testing.T) {
	s, app, _, _ := newTestState(t, "checkout", "i-1", map[string]string{"zone": "a"})
	app.refuse[2], app.refuse[3] = true, true
	s.onStable(envelopeBytes(t, "checkout", 1))
	s.onStable(envelopeBytes(t, "checkout", 2))
	s.onCanary(canaryBytes(t, 3, Selector{Labels: map[string]string{"zone": "a"}}))
	s.onCanary(canaryBytes(t, 5, Selector{Labels: map[string]string{"zone": "b"}}))
	if v, reason, _ := s.nack(); v != 2 || reason != ReasonApply {
		t.Fatalf("heartbeat NACK (%d, %s), want the NACK of the stable target v2", v, reason)
	}
}

// After a restart the fallback is the last stable version the instance ran:
// not an older one left beside the cache by an earlier canary, and not none
// when no canary ran before the restart.
func TestRestartFallsBackToTheLastStableVersionRun(t *testing.T) {
	zoneA := Selector{Labels: map[string]string{"zone": "a"}}
	tests := []struct {
		name  string
		first func(t *testing.T, s *state)
	}{
		{"an earlier canary was promoted", func(t *testing.T, s *state) {
			s.onStable(envelopeBytes(t, "checkout", 4))
			s.onCanary(canaryBytes(t, 6, zoneA))
			s.onStable(canaryEnvelopeBytes(t, 6)) // promotion
			s.onCanaryGone()
			s.onStable(envelopeBytes(t, "checkout", 7))
		}},
		{"no canary before the restart", func(t *testing.T, s *state) {
			s.onStable(envelopeBytes(t, "checkout", 7))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cache := filepath.Join(t.TempDir(), "rules.json")
			first, _, _, _ := newTestState(t, "checkout", "i-1", map[string]string{"zone": "a"})
			first.cachePath = cache
			tt.first(t, first)
			s, app, _, _ := newTestState(t, "checkout", "i-1", map[string]string{"zone": "a"})
			s.cachePath = cache
			app.refuse[8] = true
			s.loadCache()
			s.onStable(envelopeBytes(t, "checkout", 8))
			s.onCanary(canaryBytes(t, 9, zoneA))
			s.onCanaryGone()
			if got := s.running.Load(); got != 7 {
				t.Fatalf("running v%d, want v7, the last stable version run", got)
			}
		})
	}
}

// Two envelopes of one version refused in turn are both remembered: the
// first was offered again when it came back as the stable version.
func TestTwoRefusedEnvelopesOfOneVersionAreBothRemembered(t *testing.T) {
	s, app, _, _ := newTestState(t, "checkout", "i-1", map[string]string{"zone": "a"})
	s.onStable(envelopeBytes(t, "checkout", 1))
	app.refuse[6] = true
	a, b := seqEnvelope(t, 6, 0), seqEnvelope(t, 6, 1)
	for _, env := range []*Canary{{Selector{Labels: map[string]string{"zone": "a"}}, a}, {Selector{Labels: map[string]string{"zone": "a"}}, b}} {
		data, err := EncodeCanary(env)
		if err != nil {
			t.Fatal(err)
		}
		s.onCanary(data)
	}
	s.onStable(mustJSON(t, a))
	if got := app.attempts(); !slices.Equal(got, []int64{1, 6, 6}) {
		t.Fatalf("applier called with %v, want [1 6 6]: v6 as first refused is not offered again", got)
	}
}

// The last good stable version, refused once, is not offered again when a
// newer stable version arrives (refusals below the stable one were
// dropped, the fallback's included).
func TestRefusedLastGoodStableIsNotRetriedAfterANewerStable(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "rules.json")
	first, _, _, _ := newTestState(t, "checkout", "i-1", nil)
	first.cachePath = cache
	first.onStable(envelopeBytes(t, "checkout", 2))
	first.onCanary(canaryBytes(t, 3, Selector{Percent: 100}))
	s, app, _, _ := newTestState(t, "checkout", "i-1", nil)
	s.cachePath = cache
	app.refuse[2], app.refuse[4] = true, true
	s.loadCache() // the canary v3, with v2 as the last good stable
	s.onStable(envelopeBytes(t, "checkout", 2))
	s.onCanaryGone() // v2 refused: nothing to return to
	s.onStable(envelopeBytes(t, "checkout", 4))
	s.onCanary(canaryBytes(t, 5, Selector{Percent: 100}))
	s.onCanaryGone()
	if got := app.attempts(); !slices.Equal(got, []int64{3, 2, 4, 5}) {
		t.Fatalf("applier called with %v, want [3 2 4 5]: v2 and v4 were refused", got)
	}
}

func canaryEnvelopeBytes(t testing.TB, version int64) []byte {
	t.Helper()
	c, err := DecodeCanary(canaryBytes(t, version, Selector{Percent: 100}))
	if err != nil {
		t.Fatal(err)
	}
	return mustJSON(t, c.Envelope)
}

// cacheWithCanary leaves the cache files of a process that ran the stable
// v4 and then the canary v6: the cache holds v6, the file beside it v4.
func cacheWithCanary(t *testing.T) string {
	t.Helper()
	cache := filepath.Join(t.TempDir(), "rules.json")
	first, _, _, _ := newTestState(t, "checkout", "i-1", map[string]string{"zone": "a"})
	first.cachePath = cache
	first.onStable(envelopeBytes(t, "checkout", 4))
	first.onCanary(canaryBytes(t, 6, Selector{Labels: map[string]string{"zone": "a"}}))
	if first.running.Load() != 6 {
		t.Fatalf("first run on v%d, want the canary v6", first.running.Load())
	}
	return cache
}

// A process whose applier refuses the cached version at start (a new binary
// refusing the cached canary) starts on the last stable version it ran,
// kept beside the cache, NACKs the cached version with the refusal, and
// does not offer it again when the watch delivers it. It ran with no rules
// until the watch delivered a version it accepted, possibly never.
func TestRefusedCachedVersionStartsOnTheCachedStable(t *testing.T) {
	cache := cacheWithCanary(t)
	s, app, reports, _ := newTestState(t, "checkout", "i-1", map[string]string{"zone": "a"})
	s.cachePath = cache
	app.refuse[6] = true
	s.loadCache()
	if got := s.running.Load(); got != 4 {
		t.Fatalf("running v%d at start, want the cached stable v4", got)
	}
	if got := app.attempts(); !slices.Equal(got, []int64{6, 4}) {
		t.Fatalf("applier called with %v, want [6 4]", got)
	}
	if v, reason, msg := s.nack(); v != 6 || reason != ReasonApply || msg == "" {
		t.Fatalf("heartbeat NACK (%d, %s, %q), want the applier's refusal of the cached v6", v, reason, msg)
	}
	if r := lastReport(t, reports); r.Status != StatusNACK || r.Version != 6 || r.Reason != ReasonApply || r.Running != 4 {
		t.Fatalf("last report %+v, want the NACK of v6 running v4", r)
	}
	// NATS answers: the canary v6 still selects the instance. It is not
	// offered again, and heartbeats keep its NACK.
	s.onStable(envelopeBytes(t, "checkout", 4))
	s.onCanary(canaryBytes(t, 6, Selector{Labels: map[string]string{"zone": "a"}}))
	s.settle()
	if got := app.attempts(); !slices.Equal(got, []int64{6, 4}) {
		t.Fatalf("applier called with %v, want [6 4]: v6 was refused in this process", got)
	}
	if got := s.running.Load(); got != 4 {
		t.Fatalf("running v%d, want v4", got)
	}
	if v, reason, _ := s.nack(); v != 6 || reason != ReasonApply {
		t.Fatalf("heartbeat NACK (%d, %s), want that of the target v6", v, reason)
	}
}

// Both cached versions refused: both are NACKed, and heartbeats repeat the
// NACK of the cached version, the one the instance was meant to run.
func TestBothCachedVersionsRefusedAreNACKed(t *testing.T) {
	cache := cacheWithCanary(t)
	s, app, reports, _ := newTestState(t, "checkout", "i-1", map[string]string{"zone": "a"})
	s.cachePath = cache
	app.refuse[6], app.refuse[4] = true, true
	s.loadCache()
	if got := s.running.Load(); got != 0 {
		t.Fatalf("running v%d, want none", got)
	}
	var nacked []int64
	for _, r := range *reports {
		if r.Status == StatusNACK && r.Reason == ReasonApply {
			nacked = append(nacked, r.Version)
		}
	}
	slices.Sort(nacked)
	if !slices.Equal(nacked, []int64{4, 6}) {
		t.Fatalf("NACKed %v, want [4 6]", nacked)
	}
	if v, _, _ := s.nack(); v != 6 {
		t.Fatalf("heartbeat NACK of v%d, want the cached v6", v)
	}
	s.onStable(envelopeBytes(t, "checkout", 4))
	s.onCanaryGone()
	if got := app.attempts(); !slices.Equal(got, []int64{6, 4}) {
		t.Fatalf("applier called with %v, want [6 4]", got)
	}
}

// New with NATS down: the watcher starts on the cached stable version and
// still tells OnError why the cached version was not applied.
func TestNewStartsOnTheCachedStableWhenTheCachedVersionIsRefused(t *testing.T) {
	cache := cacheWithCanary(t)
	app := &fakeApplier{refuse: map[int64]bool{6: true}}
	var got []error
	reg := prometheus.NewRegistry()
	w := newOffline(t, Options{Service: "checkout", Applier: app, CacheFile: cache, Registerer: reg,
		OnError: func(err error) { got = append(got, err) }})
	if w.Running() != 4 {
		t.Fatalf("running v%d, want the cached stable v4", w.Running())
	}
	if len(got) == 0 || !errors.Is(got[0], ErrCache) {
		t.Fatalf("errors %v, want the refusal of the cached version", got)
	}
	if c := counter(t, reg, "governor_sdk_watch_rejected_total", "reason", string(ReasonApply)); c != 1 {
		t.Fatalf("rejected{reason=apply} = %v, want 1", c)
	}
}

// A cache file that does not decode (a version written by a newer SDK, with
// a field this one does not know, before a rollback of the binary; a
// damaged file) starts the instance on the last stable version it ran, kept
// beside the cache, rather than on no rules while NATS is down. The cached
// version is NACKed as the watch would NACK that value.
func TestUndecodableCacheStartsOnTheCachedStable(t *testing.T) {
	var newer map[string]any
	if err := json.Unmarshal(envelopeBytes(t, "checkout", 5), &newer); err != nil {
		t.Fatal(err)
	}
	newer["bogus"] = 1
	tests := []struct {
		name    string
		cache   []byte
		version int64
		reason  Reason
	}{
		{"field of a newer SDK", mustJSON(t, newer), 5, ReasonInvalid},
		{"damaged file", []byte(`{"version":5,"serv`), 0, ReasonNotJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cache := filepath.Join(t.TempDir(), "rules.json")
			if err := os.WriteFile(cache, tt.cache, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := SaveCache(stableCachePath(cache), envelopeBytes(t, "checkout", 4)); err != nil {
				t.Fatal(err)
			}
			s, app, reports, reg := newTestState(t, "checkout", "i-1", nil)
			s.cachePath = cache
			var errs []error
			s.onError = func(err error) { errs = append(errs, err) }
			s.loadCache()
			if got := app.versions(); !slices.Equal(got, []int64{4}) || s.running.Load() != 4 {
				t.Fatalf("applied %v running v%d, want the cached stable v4", got, s.running.Load())
			}
			if len(errs) != 1 || !errors.Is(errs[0], ErrCache) {
				t.Fatalf("errors %v, want the cache's", errs)
			}
			if c := counter(t, reg, "governor_sdk_watch_cache_errors_total", "op", "load"); c != 1 {
				t.Fatalf("cache load errors = %v, want 1", c)
			}
			r := lastReport(t, reports)
			if r.Status != StatusNACK || r.Version != tt.version || r.Reason != tt.reason || r.Running != 4 || r.Error == "" {
				t.Fatalf("last report %+v, want the NACK of v%d (%s) running v4", r, tt.version, tt.reason)
			}
			// The watch delivers v4 again: nothing changes.
			s.onStable(envelopeBytes(t, "checkout", 4))
			if got := app.versions(); !slices.Equal(got, []int64{4}) {
				t.Fatalf("applied %v, want v4 once", got)
			}
		})
	}
}
