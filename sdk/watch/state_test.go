package watch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"governor.dev/governor/sdk/rules"
)

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBadInputIsRefusedAndOldRulesKept(t *testing.T) {
	good := envelopeBytes(t, "checkout", 7)
	wrongSum := bytes.Replace(envelopeBytes(t, "checkout", 8), []byte(`"sha256:`), []byte(`"sha256:00`), 1)
	invalid := []byte(`{"service":"checkout","version":9,"checksum":"x","ruleset":{"service":"checkout","routes":[{"name":"api","match":{"path_prefix":"nope"}}]}}`)
	tests := []struct {
		name        string
		payload     []byte
		maxBytes    int
		wantReason  Reason
		wantVersion int64
		wantInError string
	}{
		{"not JSON", []byte("\x00\x01garbage"), 0, ReasonNotJSON, 0, "not JSON"},
		{"truncated JSON", good[:len(good)/2], 0, ReasonNotJSON, 0, "not JSON"},
		{"wrong checksum", wrongSum, 0, ReasonChecksum, 8, "checksum"},
		{"other service", envelopeBytes(t, "payments", 8), 0, ReasonWrongService, 8, `"payments"`},
		{"oversized", envelopeBytes(t, "checkout", 8), 64, ReasonOversized, 8, "at most 64 allowed"},
		{"invalid ruleset", invalid, 0, ReasonInvalid, 9, "routes[0].match.path_prefix"},
		{"version zero", envelopeBytes(t, "checkout", 0), 0, ReasonInvalid, 0, "version: must be above 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, app, reports, reg := newTestState(t, "checkout", "i-1", nil)
			s.onStable(good)
			if tt.maxBytes > 0 {
				s.maxBytes = tt.maxBytes
			}
			s.onStable(tt.payload)

			if got := app.versions(); len(got) != 1 || got[0] != 7 {
				t.Fatalf("applied %v, want only [7]", got)
			}
			if s.running.Load() != 7 {
				t.Fatalf("running %d, want 7", s.running.Load())
			}
			if len(*reports) != 2 {
				t.Fatalf("%d reports, want ACK then NACK", len(*reports))
			}
			r := (*reports)[1]
			if r.Status != StatusNACK || r.Reason != tt.wantReason || r.Version != tt.wantVersion || r.Running != 7 {
				t.Fatalf("report %+v, want NACK %s of version %d running 7", r, tt.wantReason, tt.wantVersion)
			}
			if !strings.Contains(r.Error, tt.wantInError) {
				t.Fatalf("error %q does not mention %q", r.Error, tt.wantInError)
			}
			if v, reason, msg := s.nack(); v != tt.wantVersion || reason != tt.wantReason || msg != r.Error {
				t.Fatalf("heartbeat NACK (%d, %s, %q) does not repeat the report", v, reason, msg)
			}
			if got := counter(t, reg, "governor_sdk_watch_rejected_total", "reason", string(tt.wantReason)); got != 1 {
				t.Fatalf("rejected{%s} = %v, want 1", tt.wantReason, got)
			}
		})
	}
}

func TestOlderVersionsAreIgnored(t *testing.T) {
	s, app, reports, reg := newTestState(t, "checkout", "i-1", nil)
	for _, v := range []int64{3, 5, 4, 5, 2, 6} {
		s.onStable(envelopeBytes(t, "checkout", v))
	}
	if got := app.versions(); len(got) != 3 || got[0] != 3 || got[1] != 5 || got[2] != 6 {
		t.Fatalf("applied %v, want [3 5 6]", got)
	}
	if len(*reports) != 3 {
		t.Fatalf("%d reports, want 3 ACKs", len(*reports))
	}
	if got := counter(t, reg, "governor_sdk_watch_messages_total", "result", "ignored"); got != 2 {
		t.Fatalf("ignored = %v, want 2 (versions 4 and 2)", got)
	}
}

func TestApplyRefusalIsNACKedOnce(t *testing.T) {
	s, app, reports, _ := newTestState(t, "checkout", "i-1", nil)
	app.refuse[2] = true
	s.onStable(envelopeBytes(t, "checkout", 1))
	s.onStable(envelopeBytes(t, "checkout", 2))
	s.reconcile(0) // a resync must not retry the refused version
	if s.running.Load() != 1 {
		t.Fatalf("running %d, want 1", s.running.Load())
	}
	if len(*reports) != 2 || (*reports)[1].Reason != ReasonApply || !strings.Contains((*reports)[1].Error, "conflict") {
		t.Fatalf("reports %+v", *reports)
	}
	s.onStable(envelopeBytes(t, "checkout", 3))
	if s.running.Load() != 3 {
		t.Fatalf("running %d, want 3 after a newer version", s.running.Load())
	}
}

func canaryBytes(t testing.TB, version int64, sel Selector) []byte {
	t.Helper()
	env, err := rules.NewEnvelope(version, ruleset("checkout", float64(version)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := EncodeCanary(&Canary{Selector: sel, Envelope: env})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCanaryPromoteAndAbort(t *testing.T) {
	zoneA := map[string]string{"zone": "a"}
	tests := []struct {
		name     string
		labels   map[string]string
		selected bool
	}{
		{"selected by label", zoneA, true},
		{"not selected", map[string]string{"zone": "b"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, _, _ := newTestState(t, "checkout", "i-1", tt.labels)
			s.onStable(envelopeBytes(t, "checkout", 1))
			s.onCanary(canaryBytes(t, 2, Selector{Labels: zoneA}))
			want := int64(1)
			if tt.selected {
				want = 2
			}
			if s.running.Load() != want {
				t.Fatalf("running %d under canary, want %d", s.running.Load(), want)
			}
			// Abort: the canary instances return to the stable version.
			s.onCanaryGone()
			if s.running.Load() != 1 {
				t.Fatalf("running %d after abort, want 1", s.running.Load())
			}
			// A new canary, then promotion: stable first, then the key goes.
			s.onCanary(canaryBytes(t, 3, Selector{Labels: zoneA}))
			s.onStable(envelopeBytes(t, "checkout", 3))
			s.onCanaryGone()
			if s.running.Load() != 3 {
				t.Fatalf("running %d after promotion, want 3", s.running.Load())
			}
		})
	}
}

func TestCanaryForAnotherServiceIsRefused(t *testing.T) {
	s, _, reports, _ := newTestState(t, "checkout", "i-1", nil)
	env, _ := rules.NewEnvelope(4, ruleset("payments", 4))
	b, _ := EncodeCanary(&Canary{Selector: Selector{Percent: 100}, Envelope: env})
	s.onCanary(b)
	if s.running.Load() != 0 || len(*reports) != 1 || (*reports)[0].Reason != ReasonWrongService {
		t.Fatalf("running %d, reports %+v", s.running.Load(), *reports)
	}
}

// TestALongNACKStillReachesTheControlPlane: the validation error of a large
// ruleset lists every problem (here about 190 KiB). The NACK and the
// heartbeats that repeat it must stay within what DecodeReport and
// DecodeHeartbeat accept, or the ledger drops them: the NACK is lost and the
// instance, whose heartbeats are all refused, shows as GONE.
func TestALongNACKStillReachesTheControlPlane(t *testing.T) {
	s, _, reports, _ := newTestState(t, "checkout", "i-1", map[string]string{"zone": "a"})
	s.onStable(envelopeBytes(t, "checkout", 1))
	routes := make([]string, 1000)
	for i := range routes {
		routes[i] = fmt.Sprintf(`{"name":"r%d","match":{"path_prefix":"é%d"},"shedding":{}}`, i, i)
	}
	s.onStable([]byte(`{"service":"checkout","version":2,"checksum":"x","ruleset":{"service":"checkout","routes":[` + strings.Join(routes, ",") + `]}}`))
	r := (*reports)[len(*reports)-1]
	if r.Status != StatusNACK || r.Version != 2 || !strings.Contains(r.Error, "routes[0].match.path_prefix") {
		t.Fatalf("report %.300v, want the NACK of v2 naming the first problem", r)
	}
	if !utf8.ValidString(r.Error) || !strings.HasSuffix(r.Error, "more bytes)") {
		t.Fatalf("error not cut cleanly: ...%q", r.Error[max(0, len(r.Error)-80):])
	}
	b := mustJSON(t, r)
	if _, err := DecodeReport(b); err != nil {
		t.Fatalf("the control plane cannot read the NACK (%d bytes): %.200v", len(b), err)
	}
	h := Heartbeat{Service: "checkout", Instance: "i-1", Running: 1, IntervalMS: 1000, At: time.Unix(1, 0)}
	h.NackVersion, h.NackReason, h.NackError = s.nack()
	if b := mustJSON(t, h); len(b) > MaxWireBytes {
		t.Fatalf("heartbeat of %d bytes, at most %d accepted", len(b), MaxWireBytes)
	}
}

// TestHeartbeatNACKEndsOnceAVersionAsNewIsApplied: heartbeats repeat the
// last NACK only until the instance applies a version at least as new as
// the refused one (any version, for a NACK that named none). A NACK of
// garbage (version 0) stayed in every heartbeat for good, and a ledger that
// had not recorded it (a new record for the instance) marked the instance
// NACKED for whatever version it was told to run next.
func TestHeartbeatNACKEndsOnceAVersionAsNewIsApplied(t *testing.T) {
	zoneA := Selector{Labels: map[string]string{"zone": "a"}}
	tests := []struct {
		name     string
		refuse   int64 // the applier refuses this version
		steps    func(t *testing.T, s *state)
		wantNack int64 // -1: no NACK in the heartbeat
		reason   Reason
	}{
		{"garbage, then a newer version", 0, func(t *testing.T, s *state) {
			s.onStable([]byte("garbage"))
			s.onStable(envelopeBytes(t, "checkout", 2))
		}, -1, ""},
		{"refused version, then a newer one", 2, func(t *testing.T, s *state) {
			s.onStable(envelopeBytes(t, "checkout", 2))
			s.onStable(envelopeBytes(t, "checkout", 3))
		}, -1, ""},
		{"garbage, then an older version ignored", 0, func(t *testing.T, s *state) {
			s.onStable([]byte("garbage"))
			s.onStable(envelopeBytes(t, "checkout", 1))
		}, 0, ReasonNotJSON},
		{"refused canary, then an older stable version", 7, func(t *testing.T, s *state) {
			s.onCanary(canaryBytes(t, 7, zoneA))
			s.onStable(envelopeBytes(t, "checkout", 6))
		}, 7, ReasonApply},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, app, _, _ := newTestState(t, "checkout", "i-1", map[string]string{"zone": "a"})
			app.refuse[tt.refuse] = true
			s.onStable(envelopeBytes(t, "checkout", 1))
			tt.steps(t, s)
			v, reason, msg := s.nack()
			switch {
			case tt.wantNack < 0 && (reason != "" || msg != "" || v != 0):
				t.Fatalf("heartbeat repeats NACK (%d, %s, %q) after v%d was applied", v, reason, msg, s.running.Load())
			case tt.wantNack >= 0 && (v != tt.wantNack || reason != tt.reason || msg == ""):
				t.Fatalf("heartbeat NACK (%d, %s, %q), want the NACK of v%d (%s) kept: the instance has not moved past it",
					v, reason, msg, tt.wantNack, tt.reason)
			}
		})
	}
}
