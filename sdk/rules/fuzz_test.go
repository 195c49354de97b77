package rules

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
)

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// FuzzDecode: any input either decodes to a ruleset whose canonical form
// decodes again to the same canonical form, or fails with ErrInvalid. It never
// panics.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(validJSON))
	f.Add([]byte(`{"service":"a"}`))
	f.Add([]byte(`{"service":"a","routes":[{"name":"r","match":{"path_prefix":"/"},"concurrency":{},"queue":{"target":"5ms"}}]}`))
	f.Add([]byte(`{"service":"a","downstreams":[{"name":"d","breaker":{"kind":"throttle","k":2}}]}`))
	// Combinations the enforcers would ignore, refused by Validate.
	f.Add([]byte(`{"service":"a","routes":[{"name":"r","match":{"path_prefix":"/"},"queue":{"target":"5ms"},"shedding":{"rotate_every":"1h"}}]}`))
	f.Add([]byte(`{"service":"a","routes":[{"name":"r","match":{"path_prefix":"/"},"warm_up":{"period":"1m"},"exempt":{"caller_header":"X-C"}}]}`))
	f.Add([]byte(`{"service":"a","routes":[{"name":"r","match":{"path_prefix":"/"},"concurrency":{"algorithm":"fixed","max":3,"tolerance":1}}]}`))
	f.Add([]byte(`{"service":"a","downstreams":[{"name":"d","breaker":{"kind":"throttle","min_calls":3,"slow_call":"1s"}},{"name":"e","breaker":{"k":2}}]}`))
	f.Add([]byte(`{"service":"a","downstreams":[{"name":"d","breaker":{},"balancer":{"decay":"5s","panic_threshold":0.3,"consecutive_failures":5,"base_ejection_time":"10s","max_ejection_time":"2m","max_ejection_percent":20}}]}`))
	f.Add([]byte(`{"service":"a","downstreams":[{"name":"d","balancer":{"consecutive_failures":-1,"base_ejection_time":"1h1s","max_ejection_time":"1s","max_ejection_percent":0}}]}`))
	f.Add([]byte(`{"service":"a","downstreams":[{"name":"d","balancer":{"max_ejection_percent":12.5,"max_ejection_time":"1m"}}]}`))
	f.Add([]byte(`[]`))
	// Values of the wrong type, reported at their field.
	f.Add([]byte(`{"service":"a","downstreams":[{"name":"d","timeout":"soon","retry":{"max_attempts":1.5}}]}`))
	f.Add([]byte(`{"service":"a","routes":[{"name":"r","match":{"path_prefix":"/"},"rate_limit":{"rate":1e400}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Decode(data)
		if err != nil {
			var ve *ValidationError
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &ve) {
				t.Fatalf("error is not a *ValidationError wrapping ErrInvalid: %v", err)
			}
			for _, fe := range ve.Errors {
				if fe.Problem == "" {
					t.Fatalf("field error %q without a problem", fe.Field)
				}
			}
			return
		}
		c1, err := r.Canonical()
		if err != nil {
			t.Fatal(err)
		}
		r2, err := Decode(c1)
		if err != nil {
			t.Fatalf("canonical form of a valid ruleset does not decode: %v\n%s", err, c1)
		}
		c2, _ := r2.Canonical()
		if string(c1) != string(c2) {
			t.Fatalf("canonical not stable:\n%s\n%s", c1, c2)
		}
	})
}

func FuzzDecodeEnvelope(f *testing.F) {
	r, _ := Decode([]byte(validJSON))
	e, _ := NewEnvelope(3, r)
	b, _ := json.Marshal(e)
	f.Add(b)
	f.Add([]byte(`{"service":"a","version":1,"checksum":"x","ruleset":{"service":"a"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := DecodeEnvelope(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		if err := e.Verify(); err != nil {
			t.Fatalf("decoded envelope does not verify: %v", err)
		}
		// A watcher caches the envelope it applied as json.Marshal encodes
		// it and decodes it again at start: the same version comes back
		// (unless escaping made it larger than the input may be).
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > MaxEnvelopeBytes {
			return
		}
		back, err := DecodeEnvelope(b)
		if err != nil {
			t.Fatalf("the encoding of a decoded envelope does not decode: %v\n%s", err, b)
		}
		if back.Version != e.Version || back.Checksum != e.Checksum || back.Service != e.Service {
			t.Fatalf("round trip changed the envelope: %+v, want %+v", back, e)
		}
	})
}

// canonicalViaClone is the canonical encoding computed the slow, obvious
// way: a deep copy through JSON, sorted in place.
func canonicalViaClone(r *Ruleset) ([]byte, error) {
	c := r.Clone()
	slices.SortFunc(c.Routes, routeByName)
	slices.SortFunc(c.Downstreams, downstreamByName)
	for i := range c.Routes {
		slices.Sort(c.Routes[i].Match.Methods)
		if e := c.Routes[i].Exempt; e != nil {
			slices.Sort(e.Paths)
			slices.Sort(e.Callers)
		}
	}
	return json.Marshal(c)
}

// FuzzCanonical: Canonical, which copies only what it sorts, encodes every
// decodable ruleset (valid or not) exactly as a sorted deep copy does, and
// leaves the ruleset unchanged.
func FuzzCanonical(f *testing.F) {
	f.Add([]byte(validJSON))
	f.Add([]byte(`{"service":"a","routes":[{"name":"b","match":{"path_prefix":"/","methods":["POST","GET"]},"exempt":{"paths":["/z","/a"],"callers":["y","x"]}},{"name":"a","match":{"path_prefix":"/"}}],"downstreams":[{"name":"z"},{"name":"y","timeout":"1s"}]}`))
	f.Add([]byte(`{"service":"a","downstreams":[{"name":"z","balancer":{"consecutive_failures":3,"max_ejection_percent":0}},{"name":"y","breaker":{},"balancer":{"base_ejection_time":"1s","max_ejection_percent":100}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var r Ruleset
		if decodeStrict(data, &r, MaxBytes) != nil {
			return
		}
		before, err := json.Marshal(&r)
		if err != nil {
			return
		}
		got, err := r.Canonical()
		if err != nil {
			t.Fatal(err)
		}
		want, err := canonicalViaClone(&r)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("canonical\n%s\nwant\n%s", got, want)
		}
		if after, _ := json.Marshal(&r); string(after) != string(before) {
			t.Fatalf("Canonical modified the ruleset:\n%s\n%s", before, after)
		}
	})
}
