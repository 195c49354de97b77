package watch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"

	"governor.dev/governor/sdk/rules"
)

// Selector picks the instances of a staged (canary) version: a stable share of
// the instances by percentage, the instances carrying every given label, or
// both (an instance must satisfy both).
type Selector struct {
	// Percent of the instances, 0 to 100. An instance is in the share when the
	// FNV-1a hash of "<service>/<instance>" falls in the lowest Percent of
	// 10,000 buckets, so the same instances stay selected from one canary to
	// the next and raising the share only adds instances.
	Percent float64 `json:"percent,omitempty"`
	// Labels that a selected instance must carry with these exact values.
	Labels map[string]string `json:"labels,omitempty"`
}

// Validate refuses an empty selector or a percentage outside 0..100.
func (s Selector) Validate() error {
	switch {
	case math.IsNaN(s.Percent) || s.Percent < 0 || s.Percent > 100:
		return fmt.Errorf("%w: selector.percent: must be between 0 and 100, got %v", ErrMalformed, s.Percent)
	case s.Percent == 0 && len(s.Labels) == 0:
		return fmt.Errorf("%w: selector: set percent above 0, labels, or both", ErrMalformed)
	}
	for k := range s.Labels {
		if k == "" {
			return fmt.Errorf("%w: selector.labels: a label name is empty", ErrMalformed)
		}
	}
	return nil
}

// Selects reports whether the instance of the service is in the canary.
func (s Selector) Selects(service, instance string, labels map[string]string) bool {
	for k, v := range s.Labels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	if s.Percent <= 0 {
		return len(s.Labels) > 0
	}
	return float64(Bucket(service, instance)) < s.Percent*100
}

// Bucket returns the stable bucket 0..9999 of an instance of a service.
func Bucket(service, instance string) int {
	h := fnv.New64a()
	_, _ = io.WriteString(h, service)
	_, _ = io.WriteString(h, "/")
	_, _ = io.WriteString(h, instance)
	return int(h.Sum64() % 10000)
}

// MaxCanaryBytes bounds an encoded Canary: an envelope of at most
// rules.MaxEnvelopeBytes and a selector of at most 4 KiB. It stays under the
// NATS default max_payload (rules.DefaultMaxPayload) with room for the
// headers of a KV write.
const MaxCanaryBytes = rules.MaxEnvelopeBytes + 4<<10

// Canary is the value of Names.CanaryKey: a version staged to the instances
// the selector picks. Promotion writes the envelope to the stable key and
// deletes the canary key; abort deletes the canary key, and the instances
// that ran the canary return to the stable version, as do those a
// replacing canary no longer selects (also when they restart in between and
// start on the canary version from their cache).
type Canary struct {
	Selector Selector        `json:"selector"`
	Envelope *rules.Envelope `json:"envelope"`
}

// EncodeCanary checks and encodes a canary record of at most
// MaxCanaryBytes.
func EncodeCanary(c *Canary) ([]byte, error) {
	if c == nil || c.Envelope == nil {
		return nil, fmt.Errorf("%w: canary: envelope is required", ErrMalformed)
	}
	if err := c.Selector.Validate(); err != nil {
		return nil, err
	}
	if err := c.Envelope.Verify(); err != nil {
		return nil, fmt.Errorf("%w: canary envelope: %w", ErrMalformed, err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("%w: canary: %w", ErrMalformed, err)
	}
	if len(b) > MaxCanaryBytes {
		return nil, fmt.Errorf("%w: canary is %d bytes, at most %d allowed (a selector of at most %d bytes around the envelope)",
			ErrMalformed, len(b), MaxCanaryBytes, MaxCanaryBytes-rules.MaxEnvelopeBytes)
	}
	return b, nil
}

// DecodeCanary parses and verifies a canary record. Every error wraps
// ErrMalformed; envelope errors also wrap the *rules.ValidationError of
// rules.DecodeEnvelope.
func DecodeCanary(data []byte) (*Canary, error) {
	if len(data) > MaxCanaryBytes {
		return nil, fmt.Errorf("%w: canary is %d bytes, at most %d allowed", ErrMalformed, len(data), MaxCanaryBytes)
	}
	var raw struct {
		Selector Selector        `json:"selector"`
		Envelope json.RawMessage `json:"envelope"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%w: canary: %v", ErrMalformed, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: canary: unexpected data after the JSON object", ErrMalformed)
	}
	if err := raw.Selector.Validate(); err != nil {
		return nil, err
	}
	if len(raw.Envelope) == 0 {
		return nil, fmt.Errorf("%w: canary: envelope is required", ErrMalformed)
	}
	env, err := rules.DecodeEnvelope(raw.Envelope)
	if err != nil {
		return nil, fmt.Errorf("%w: canary envelope: %w", ErrMalformed, err)
	}
	return &Canary{Selector: raw.Selector, Envelope: env}, nil
}
