package rules

import (
	"encoding/json"
	"testing"
)

// BenchmarkDecodeEnvelope is what every SDK instance pays for one published
// version: strict decoding, validation and the checksum of the canonical
// encoding.
func BenchmarkDecodeEnvelope(b *testing.B) {
	// The store publishes the canonical encoding.
	r, err := Decode([]byte(validJSON))
	if err != nil {
		b.Fatal(err)
	}
	canonical, err := r.Canonical()
	if err != nil {
		b.Fatal(err)
	}
	if r, err = Decode(canonical); err != nil {
		b.Fatal(err)
	}
	e, err := NewEnvelope(3, r)
	if err != nil {
		b.Fatal(err)
	}
	data, err := json.Marshal(e)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := DecodeEnvelope(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
