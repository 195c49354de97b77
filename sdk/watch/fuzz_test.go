package watch

import (
	"errors"
	"testing"
)

func FuzzDecodeReport(f *testing.F) {
	f.Add([]byte(`{"service":"s","instance":"i","version":3,"status":"ack","running":3,"at":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"service":"s","instance":"i","version":0,"status":"nack","reason":"not_json","error":"x","running":2}`))
	f.Add([]byte(`{"service":"","status":"maybe"}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"service":"s","instance":"i","version":5,"status":"nack","reason":"apply","error":"x","checksum":"sha256:` +
		`0a","running":5,"running_checksum":"sha256:0b","at":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"service":"s","instance":"i","version":3,"status":"ack","running":0,"running_checksum":"sha256:0b"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeReport(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		if r.Service == "" || r.Instance == "" || r.Version < 0 || (r.Status != StatusACK && r.Status != StatusNACK) ||
			len(r.Checksum) > maxChecksumBytes || len(r.RunningChecksum) > maxChecksumBytes ||
			(r.Running == 0 && r.RunningChecksum != "") {
			t.Fatalf("accepted an invalid report %+v", r)
		}
	})
}

func FuzzDecodeHeartbeat(f *testing.F) {
	f.Add([]byte(`{"service":"s","instance":"i","running":3,"labels":{"zone":"a"},"interval_ms":10000}`))
	f.Add([]byte(`{"service":"s","instance":"i","running":-1}`))
	f.Add([]byte(`{"service":"s","instance":"i"} x`))
	f.Add([]byte(`{"service":"s","instance":"i","running":5,"running_checksum":"sha256:0b","nack_version":6,` +
		`"nack_reason":"apply","nack_error":"x","nack_checksum":"sha256:0c"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := DecodeHeartbeat(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		if h.Service == "" || h.Instance == "" || h.Running < 0 || h.IntervalMS < 0 ||
			len(h.NackChecksum) > maxChecksumBytes || len(h.RunningChecksum) > maxChecksumBytes ||
			(h.Running == 0 && h.RunningChecksum != "") {
			t.Fatalf("accepted an invalid heartbeat %+v", h)
		}
	})
}

func FuzzDecodeCanary(f *testing.F) {
	f.Add(canaryBytes(f, 2, Selector{Percent: 10}))
	f.Add(canaryBytes(f, 3, Selector{Labels: map[string]string{"zone": "a"}}))
	f.Add([]byte(`{"selector":{},"envelope":{}}`))
	f.Add([]byte(`{"selector":{"percent":200}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeCanary(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		if c.Selector.Validate() != nil || c.Envelope == nil || c.Envelope.Verify() != nil {
			t.Fatalf("accepted an invalid canary %+v", c)
		}
		// What a control plane encodes from it decodes to the same record
		// (unless escaping made it larger than a record may be).
		b, err := EncodeCanary(c)
		if err != nil {
			if !errors.Is(err, ErrMalformed) || len(data) <= MaxCanaryBytes/6 {
				t.Fatalf("a decoded canary does not encode: %v", err)
			}
			return
		}
		back, err := DecodeCanary(b)
		if err != nil || back.Envelope.Version != c.Envelope.Version || back.Envelope.Checksum != c.Envelope.Checksum ||
			back.Selector.Percent != c.Selector.Percent || len(back.Selector.Labels) != len(c.Selector.Labels) {
			t.Fatalf("round trip changed the canary: %+v %v, want %+v", back, err, c)
		}
	})
}

// FuzzStableValue feeds arbitrary values after a good one: the good rules
// must stay unless a valid, newer version of the service arrives.
func FuzzStableValue(f *testing.F) {
	f.Add(envelopeBytes(f, "checkout", 9))
	f.Add(envelopeBytes(f, "payments", 9))
	f.Add(envelopeBytes(f, "checkout", 1))
	f.Add([]byte(`{"service":"checkout","version":9}`))
	f.Add([]byte("not json"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, app, reports, _ := newTestState(t, "checkout", "i", nil)
		s.onStable(envelopeBytes(t, "checkout", 5))
		s.onStable(data)
		got := app.versions()
		if len(got) == 2 {
			if got[1] <= 5 || s.running.Load() != got[1] || app.current.Service != "checkout" {
				t.Fatalf("applied %v, running %d", got, s.running.Load())
			}
		} else if s.running.Load() != 5 {
			t.Fatalf("running %d after refusing, want 5", s.running.Load())
		}
		for _, r := range *reports {
			if r.Status == StatusNACK && r.Error == "" {
				t.Fatalf("NACK without an error: %+v", r)
			}
		}
	})
}

// FuzzCanaryValue feeds arbitrary canary values to a selected instance: it
// may move only to a valid, newer version of its own service.
func FuzzCanaryValue(f *testing.F) {
	f.Add(canaryBytes(f, 9, Selector{Percent: 100}))
	f.Add(canaryBytes(f, 3, Selector{Labels: map[string]string{"zone": "a"}}))
	f.Add([]byte(`{"selector":{"percent":100},"envelope":{"service":"checkout","version":9}}`))
	f.Add([]byte(`{"selector":{"percent":100},"envelope":"x"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, app, _, _ := newTestState(t, "checkout", "i", map[string]string{"zone": "a"})
		s.onStable(envelopeBytes(t, "checkout", 5))
		s.onCanary(data)
		if got := app.versions(); len(got) == 2 && (got[1] <= 5 || app.current.Service != "checkout") {
			t.Fatalf("applied %v", got)
		}
		if s.running.Load() < 5 {
			t.Fatalf("running %d, below the stable v5", s.running.Load())
		}
	})
}
