package watch

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"governor.dev/governor/sdk/rules"
)

// contentEnvelope builds version v of checkout with the content rate picks.
func contentEnvelope(t testing.TB, v int64, rate float64) *rules.Envelope {
	t.Helper()
	env, err := rules.NewEnvelope(v, ruleset("checkout", rate))
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func canaryOf(t testing.TB, env *rules.Envelope, sel Selector) []byte {
	t.Helper()
	b, err := EncodeCanary(&Canary{Selector: sel, Envelope: env})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// An instance running version 5 that meets version 5 again with other
// content (a rules store restored from a backup or recreated, numbering
// again from the start, its versions published into a recreated bucket)
// applies the new content, ACKs it, and keeps it in the cache files, so a
// restart does not bring the old content back. It kept the old rules while
// reporting v5, the version the ledger holds with the new content.
func TestSameVersionWithOtherContentReplacesTheRulesInForce(t *testing.T) {
	zoneA := Selector{Labels: map[string]string{"zone": "a"}}
	old5, new5 := contentEnvelope(t, 5, 50), contentEnvelope(t, 5, 51)
	tests := []struct {
		name  string
		start func(t *testing.T, s *state)
		next  func(t *testing.T, s *state)
		// stable: the new content is the stable version (kept beside the
		// cache too).
		stable bool
	}{
		{"stable republished", func(t *testing.T, s *state) {
			s.onStable(mustJSON(t, old5))
		}, func(t *testing.T, s *state) {
			s.onStable(mustJSON(t, new5))
		}, true},
		{"canary republished", func(t *testing.T, s *state) {
			s.onStable(envelopeBytes(t, "checkout", 4))
			s.onCanary(canaryOf(t, old5, zoneA))
		}, func(t *testing.T, s *state) {
			s.onCanary(canaryOf(t, new5, zoneA))
		}, false},
		{"stable published at the number of the canary running", func(t *testing.T, s *state) {
			s.onStable(envelopeBytes(t, "checkout", 4))
			s.onCanary(canaryOf(t, old5, zoneA))
		}, func(t *testing.T, s *state) {
			s.onStable(mustJSON(t, new5))
			s.onCanaryGone()
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cache := filepath.Join(t.TempDir(), "rules.json")
			s, app, reports, _ := newTestState(t, "checkout", "i-1", map[string]string{"zone": "a"})
			s.cachePath = cache
			tt.start(t, s)
			if s.running.Load() != 5 || s.current.Checksum != old5.Checksum {
				t.Fatalf("running v%d %s, want the first v5", s.running.Load(), s.current.Checksum)
			}
			tt.next(t, s)
			if sums := app.checksums(); sums[len(sums)-1] != new5.Checksum {
				t.Fatalf("applier holds %s, want the new content of v5 %s", sums[len(sums)-1], new5.Checksum)
			}
			if s.running.Load() != 5 || s.current.Checksum != new5.Checksum {
				t.Fatalf("running v%d %s, want v5 %s", s.running.Load(), s.current.Checksum, new5.Checksum)
			}
			if r := lastReport(t, reports); r.Status != StatusACK || r.Version != 5 || r.Running != 5 {
				t.Fatalf("last report %+v, want the ACK of the new v5", r)
			}
			cached, err := LoadCache(cache, "checkout")
			if err != nil || cached == nil || cached.Checksum != new5.Checksum {
				t.Fatalf("cache holds %+v (%v), want the new v5", cached, err)
			}
			if tt.stable {
				good, err := LoadCache(stableCachePath(cache), "checkout")
				if err != nil || good == nil || good.Checksum != new5.Checksum {
					t.Fatalf("stable cache holds %+v (%v), want the new v5", good, err)
				}
			}
			// A restart starts on the new content.
			s2, app2, _, _ := newTestState(t, "checkout", "i-1", map[string]string{"zone": "a"})
			s2.cachePath = cache
			s2.loadCache()
			if sums := app2.checksums(); !slices.Equal(sums, []string{new5.Checksum}) {
				t.Fatalf("restarted process applied %v, want the new v5 alone", sums)
			}
		})
	}
}

// A process restarted from a cache holding the old content of version 5
// applies the new content the watch delivers under the same number.
func TestRestartOnTheOldContentOfAVersionTakesTheNewContent(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "rules.json")
	old5, new5 := contentEnvelope(t, 5, 50), contentEnvelope(t, 5, 51)
	if err := SaveCache(cache, mustJSON(t, old5)); err != nil {
		t.Fatal(err)
	}
	s, app, reports, _ := newTestState(t, "checkout", "i-1", nil)
	s.cachePath = cache
	s.loadCache()
	s.onStable(mustJSON(t, new5))
	s.onCanaryGone()
	if got := app.checksums(); !slices.Equal(got, []string{old5.Checksum, new5.Checksum}) {
		t.Fatalf("applier accepted %v, want the cached v5 then the new v5", got)
	}
	if s.current.Checksum != new5.Checksum {
		t.Fatalf("running %s, want the new v5", s.current.Checksum)
	}
	if len(*reports) != 1 || (*reports)[0].Status != StatusACK || (*reports)[0].Version != 5 {
		t.Fatalf("reports %+v, want the ACK of the new v5", *reports)
	}
	if cached, err := LoadCache(cache, "checkout"); err != nil || cached.Checksum != new5.Checksum {
		t.Fatalf("cache holds %+v (%v), want the new v5", cached, err)
	}
}

// The same version with the same checksum delivered again (a new revision
// of the same envelope, a resync, a recreated bucket holding the same
// versions) is neither applied nor reported again.
func TestSameEnvelopeDeliveredAgainIsNotAppliedOrReportedAgain(t *testing.T) {
	zoneA := Selector{Labels: map[string]string{"zone": "a"}}
	stable, canary := contentEnvelope(t, 5, 50), contentEnvelope(t, 6, 60)
	s, app, reports, _ := newTestState(t, "checkout", "i-1", map[string]string{"zone": "a"})
	s.onStable(mustJSON(t, stable))
	s.onStable(mustJSON(t, stable))
	s.onCanaryGone()
	s.onStable(mustJSON(t, stable))
	if got := app.attempts(); !slices.Equal(got, []int64{5}) {
		t.Fatalf("applier called with %v, want v5 once", got)
	}
	s.onCanary(canaryOf(t, canary, zoneA))
	s.onCanary(canaryOf(t, canary, zoneA))
	s.onStable(mustJSON(t, stable))
	s.settle()
	if got := app.attempts(); !slices.Equal(got, []int64{5, 6}) {
		t.Fatalf("applier called with %v, want v5 then v6, once each", got)
	}
	if len(*reports) != 2 {
		t.Fatalf("reports %+v, want the ACKs of v5 and v6 alone", *reports)
	}
}

// Other content of the running version that the applier refuses is NACKed,
// the old content stays in force (a refused value never replaces the rules
// in force), heartbeats repeat the NACK, and the refused content is not
// offered again; a third content of the version is.
func TestRefusedOtherContentOfTheRunningVersionIsNACKedOnce(t *testing.T) {
	old5, bad5, new5 := contentEnvelope(t, 5, 50), contentEnvelope(t, 5, 51), contentEnvelope(t, 5, 52)
	s, app, reports, _ := newTestState(t, "checkout", "i-1", nil)
	app.refuseSum = map[string]bool{bad5.Checksum: true}
	s.onStable(mustJSON(t, old5))
	s.onStable(mustJSON(t, bad5))
	if s.current.Checksum != old5.Checksum {
		t.Fatalf("running %s, want the first v5", s.current.Checksum)
	}
	if r := lastReport(t, reports); r.Status != StatusNACK || r.Version != 5 || r.Reason != ReasonApply {
		t.Fatalf("last report %+v, want the NACK of the refused v5", r)
	}
	if v, reason, _ := s.nack(); v != 5 || reason != ReasonApply {
		t.Fatalf("heartbeat NACK (%d, %s), want v5 apply", v, reason)
	}
	n := len(*reports)
	s.onStable(mustJSON(t, bad5))
	s.onCanaryGone()
	if got := app.attempts(); !slices.Equal(got, []int64{5, 5}) {
		t.Fatalf("applier called with %v, want each content of v5 once", got)
	}
	if len(*reports) != n {
		t.Fatalf("reports %+v: the refused v5 was reported again", (*reports)[n:])
	}
	s.onStable(mustJSON(t, new5))
	if s.current.Checksum != new5.Checksum {
		t.Fatalf("running %s, want the third content of v5", s.current.Checksum)
	}
	if v, _, _ := s.nack(); v != 0 {
		t.Fatalf("heartbeat NACK of v%d, want none once v5 is applied", v)
	}
}

// Through the watch: a recreated bucket (revisions restarted, later times)
// holding version 5 with other content replaces the rules of the instance
// running the first v5; the same entry delivered again by a re-watch or a
// resync, and a new revision of the same envelope, change nothing.
func TestRecreatedBucketWithOtherContentOfTheRunningVersionIsApplied(t *testing.T) {
	old5, new5 := contentEnvelope(t, 5, 50), contentEnvelope(t, 5, 51)
	s, app, reports, _ := newTestState(t, "checkout", "i-1", nil)
	w := &Watcher{st: s}
	at := time.Unix(100, 0)
	w.handleEntry(true, fakeEntry{key: "checkout.stable", value: mustJSON(t, old5), rev: 9, at: at})
	recreated := fakeEntry{key: "checkout.stable", value: mustJSON(t, new5), rev: 1, at: at.Add(time.Hour)}
	w.handleEntry(true, recreated)
	w.handleEntry(true, recreated)
	w.handleEntry(true, fakeEntry{key: "checkout.stable", value: mustJSON(t, new5), rev: 2, at: at.Add(2 * time.Hour)})
	if got := app.checksums(); !slices.Equal(got, []string{old5.Checksum, new5.Checksum}) {
		t.Fatalf("applier accepted %v, want the first v5 then the new v5, once each", got)
	}
	if len(*reports) != 2 || (*reports)[1].Status != StatusACK || (*reports)[1].Version != 5 {
		t.Fatalf("reports %+v, want the ACK of each content of v5", *reports)
	}
}
