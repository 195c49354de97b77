package watch

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"governor.dev/governor/sdk/rules"
)

// largestEnvelope is the envelope of a ruleset of exactly rules.MaxBytes
// for service, at the largest version.
func largestEnvelope(t *testing.T, service string) *rules.Envelope {
	t.Helper()
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
	return env
}

// TestLargestVersionIsAppliedWithTheDefaultLimit: with the default
// MaxBytes an instance applies the largest ruleset a store accepts, as a
// stable value and as a canary; the default stays under the NATS default
// max_payload with room for headers.
func TestLargestVersionIsAppliedWithTheDefaultLimit(t *testing.T) {
	if d := DefaultOptions().MaxBytes; d != MaxCanaryBytes || d > rules.DefaultMaxPayload-1024 {
		t.Fatalf("default MaxBytes %d, MaxCanaryBytes %d, NATS default max_payload %d", d, MaxCanaryBytes, rules.DefaultMaxPayload)
	}
	service := strings.Repeat("s", rules.MaxNameLen)
	env := largestEnvelope(t, service)

	s, app, reports, _ := newTestState(t, service, "i", map[string]string{"zone": "a"})
	s.maxBytes = DefaultOptions().MaxBytes
	s.onStable(mustJSON(t, env))
	if v := app.versions(); len(v) != 1 || v[0] != math.MaxInt64 || len(*reports) != 1 || (*reports)[0].Status != StatusACK {
		t.Fatalf("applied %v, reports %+v", v, *reports)
	}

	sel := Selector{Percent: 100, Labels: map[string]string{"zone": "a", "track": strings.Repeat("t", 3000)}}
	b, err := EncodeCanary(&Canary{Selector: sel, Envelope: env})
	if err != nil {
		t.Fatalf("canary with a 3 KB selector: %v", err)
	}
	if _, err := DecodeCanary(b); err != nil || len(b) > s.maxBytes {
		t.Fatalf("canary of %d bytes does not decode within %d: %.200v", len(b), s.maxBytes, err)
	}
}

// TestCanaryWithAnOversizedSelectorIsRefused: EncodeCanary keeps a canary
// within MaxCanaryBytes, so a control plane cannot publish what the
// instances would refuse.
func TestCanaryWithAnOversizedSelectorIsRefused(t *testing.T) {
	env := largestEnvelope(t, strings.Repeat("s", rules.MaxNameLen))
	sel := Selector{Percent: 10, Labels: map[string]string{"track": strings.Repeat("t", 5000)}}
	_, err := EncodeCanary(&Canary{Selector: sel, Envelope: env})
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("EncodeCanary = %v, want ErrMalformed naming the limit", err)
	}
	raw, _ := json.Marshal(&Canary{Selector: sel, Envelope: env})
	if _, err := DecodeCanary(raw); !errors.Is(err, ErrMalformed) {
		t.Fatalf("DecodeCanary of %d bytes = %v, want ErrMalformed", len(raw), err)
	}
}
