package limit

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// FuzzObserve drives both adaptive limiters with arbitrary sample streams
// (clock jumps and stalls, zero and huge RTTs, any in-flight, drops) and
// checks the invariants: the limit stays within its bounds, the state stays
// finite, and no sample is lost.
func FuzzObserve(f *testing.F) {
	f.Add([]byte{})
	f.Add(sample(nil, 1000, 5_000_000, 20, false, 100))
	f.Add(sample(sample(nil, 1000, 5_000_000, 20, false, 200), 1000, 500_000_000, 20, true, 200))
	f.Add(sample(nil, 0, 0, 0, false, 300))
	f.Add(sample(sample(nil, 100_000_000, 1, 1, false, 50), 1, math.MaxInt64, math.MaxInt32, true, 50))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, alg := range []string{rules.AlgorithmGradient, rules.AlgorithmLittle} {
			cc := rules.Concurrency{Algorithm: alg, Min: 2, Max: 300, ProbeInterval: rules.Duration(time.Second)}
			l, err := New(cc, clock.NewFake(time.Time{}), WithMinSamples(3), WithWindow(10*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			c := coreOf(l)
			now, n := int64(0), int64(0)
			for b := data; len(b) >= 13; b = b[13:] {
				now += int64(binary.LittleEndian.Uint32(b)) // up to ~4 s per step
				rtt := int64(binary.LittleEndian.Uint32(b[4:])) << (b[12] & 31)
				inflight := int(binary.LittleEndian.Uint32(b[8:]) & 0xffff)
				l.Observe(now, rtt, inflight, b[12]&0x80 != 0)
				n++
				if lim := l.Limit(); lim < 2 || lim > 300 {
					t.Fatalf("%s: limit %d outside [2, 300]", alg, lim)
				}
			}
			s := c.Snapshot()
			if s.Learned < 2 || s.Learned > 300 || s.NoLoadRTT < 0 || s.SampleRTT < 0 ||
				math.IsNaN(c.cur) || math.IsNaN(c.noLoad) || math.IsInf(c.noLoad, 0) || math.IsNaN(s.MaxThroughput) {
				t.Fatalf("%s: bad state %+v (cur %v, noLoad %v)", alg, s, c.cur, c.noLoad)
			}
			if got := c.taken + countSamples(c.shards); got != n {
				t.Fatalf("%s: accounted %d samples, want %d", alg, got, n)
			}
		}
	})
}

func coreOf(l Limiter) *core {
	switch v := l.(type) {
	case *Gradient:
		return &v.core
	case *Little:
		return &v.core
	}
	panic("not an adaptive limiter")
}

// sample appends count copies of one encoded sample.
func sample(b []byte, dt uint32, rtt int64, inflight uint32, dropped bool, count int) []byte {
	shift := byte(0)
	for rtt > math.MaxUint32 {
		rtt >>= 1
		shift++
	}
	if dropped {
		shift |= 0x80
	}
	for range count {
		b = binary.LittleEndian.AppendUint32(b, dt)
		b = binary.LittleEndian.AppendUint32(b, uint32(rtt))
		b = binary.LittleEndian.AppendUint32(b, inflight)
		b = append(b, shift)
	}
	return b
}
