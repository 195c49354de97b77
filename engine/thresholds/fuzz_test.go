package thresholds

import (
	"encoding/binary"
	"math"
	"testing"
	"time"
)

// FuzzDetector feeds arbitrary value and time-step sequences; scores stay in
// [0, 1] and the detector never panics.
func FuzzDetector(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 1})
	f.Add([]byte("\xff\xff\xff\xff\xff\xff\xef\x7f\x05\x00\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Add([]byte("\x01\x00\x00\x00\x00\x00\xf8\x7f\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		opt := DefaultOptions()
		opt.Warmup = 3
		d, err := New(opt)
		if err != nil {
			t.Fatal(err)
		}
		ts := time.Unix(1e9, 0)
		for len(data) >= 9 {
			v := math.Float64frombits(binary.LittleEndian.Uint64(data))
			ts = ts.Add(time.Duration(int8(data[8])) * time.Minute) // steps may go backwards
			data = data[9:]
			res := d.Observe(ts, v)
			if !(res.Score >= 0 && res.Score <= 1) {
				t.Fatalf("value %v: score %v outside [0, 1]", v, res.Score)
			}
		}
	})
}
