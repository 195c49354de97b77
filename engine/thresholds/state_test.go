package thresholds

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// series is a noisy daily cycle with a few spikes, one sample a minute.
func series(rng *rand.Rand, i int) (time.Time, float64) {
	t := time.Unix(1.7e9, 0).Add(time.Duration(i) * time.Minute)
	v := 0.1 + 0.02*math.Sin(2*math.Pi*float64(i)/1440) + 0.005*rng.NormFloat64()
	if i%997 == 0 {
		v *= 3
	}
	return t, v
}

// TestDetectorStateRoundTrip: a detector restored from another's state
// scores every later sample exactly as the original does.
func TestDetectorStateRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	a, err := New(DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	const split = 3000 // past the warm-up and a full day
	for i := range split {
		a.Observe(series(rng, i))
	}
	b, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("detector state after %d samples: %d bytes", split, len(b))
	r, _ := New(DefaultOptions())
	if err := r.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if r.Samples() != split {
		t.Fatalf("restored detector has %d samples, want %d", r.Samples(), split)
	}
	for i := split; i < split+2000; i++ {
		ts, v := series(rng, i)
		want, got := a.Observe(ts, v), r.Observe(ts, v)
		if got != want {
			t.Fatalf("sample %d: restored detector says %+v, original %+v", i, got, want)
		}
	}
	again, _ := r.MarshalBinary()
	orig, _ := a.MarshalBinary()
	if string(again) != string(orig) {
		t.Fatal("restored detector's state differs from the original's after the same samples")
	}
}

func TestRecommenderStateRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	opt := DefaultRecommenderOptions()
	opt.MinSamples = 500
	a, err := NewRecommender(opt)
	if err != nil {
		t.Fatal(err)
	}
	iv := func(i int) Interval {
		ts, p99 := series(rng, i)
		return Interval{Time: ts, Throughput: 100 + 10*rng.Float64(), ErrorRatio: 0.002 + 0.001*rng.Float64(), LatencyP50: p99 / 3, LatencyP99: p99}
	}
	for i := range 400 {
		a.Observe(iv(i))
	}
	b, _ := a.MarshalBinary()
	r, _ := NewRecommender(opt)
	if err := r.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	t.Logf("recommender state after 400 intervals: %d bytes", len(b))
	for i := 400; i < 1200; i++ {
		x := iv(i)
		if a.Observe(x) != r.Observe(x) {
			t.Fatalf("interval %d: health verdicts differ", i)
		}
	}
	want, got := a.Recommend(), r.Recommend()
	if want != got {
		t.Fatalf("restored recommends %+v, original %+v", got, want)
	}
	if want.Inconclusive || !(want.ErrorWarn > want.BaselineErrorRatio && want.ErrorCritical > want.ErrorWarn) {
		t.Fatalf("error-ratio levels not learned: %+v", want)
	}
	if !(want.BaselineErrorRatio > 0.002 && want.BaselineErrorRatio < 0.003 && want.ErrorWarn < 0.01) {
		t.Fatalf("baseline error ratio %v, warn %v: want about 0.0025 and a warn level below 1%%", want.BaselineErrorRatio, want.ErrorWarn)
	}
}

func TestSketchStateRoundTrip(t *testing.T) {
	s, _ := NewSketch(DefaultSketchOptions())
	for i := range 1000 {
		s.Add(time.Unix(int64(i*60), 0), float64(i%37)/100)
	}
	b, _ := s.MarshalBinary()
	r, _ := NewSketch(DefaultSketchOptions())
	if err := r.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	for _, q := range []float64{0, 0.1, 0.5, 0.99, 1} {
		w, _ := s.Quantile(q)
		g, _ := r.Quantile(q)
		if w != g {
			t.Fatalf("q%v: restored %v, original %v", q, g, w)
		}
	}
}

// TestStateRefused: another version, other options, truncation and
// trailing bytes are refused and leave the receiver as it was.
func TestStateRefused(t *testing.T) {
	d, _ := New(DefaultOptions())
	for i := range 50 {
		d.Observe(time.Unix(int64(i), 0), float64(i))
	}
	good, _ := d.MarshalBinary()
	other := DefaultOptions()
	other.Seasons = []Season{Daily}
	od, _ := New(other)
	tests := []struct {
		name string
		into *Detector
		b    []byte
		want string
	}{
		{"version", d, append([]byte{StateVersion + 1}, good[1:]...), "format version 3 is newer than this release reads"},
		{"version 0", d, append([]byte{0}, good[1:]...), "format version 0"},
		{"kind", d, append([]byte{StateVersion, kindSketch}, good[2:]...), "kind"},
		{"options", od, good, "other options"},
		{"truncated", d, good[:len(good)/2], "truncated"},
		{"trailing", d, append(append([]byte{}, good...), 0), "trailing"},
		{"empty", d, nil, "truncated header"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := tt.into.MarshalBinary()
			err := tt.into.UnmarshalBinary(tt.b)
			if !errors.Is(err, ErrState) || !contains(err.Error(), tt.want) {
				t.Fatalf("err %v: want ErrState saying %q", err, tt.want)
			}
			if after, _ := tt.into.MarshalBinary(); string(after) != string(before) {
				t.Fatal("refused state changed the detector")
			}
		})
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// fuzzStates are the options and seeds of the state fuzz tests: valid
// states of each kind, fresh and learned (seasonal profiles started,
// sketches decayed, intervals held out), and recommender states in format
// version 1 (with and without the latency count).
func fuzzStates() (RecommenderOptions, [][]byte) {
	opt := DefaultRecommenderOptions()
	opt.Detector.Warmup = 3
	opt.MinSamples = 2
	var seeds [][]byte
	add := func(ss ...interface{ MarshalBinary() ([]byte, error) }) {
		for _, s := range ss {
			b, _ := s.MarshalBinary()
			seeds = append(seeds, b)
		}
	}
	d, _ := New(opt.Detector)
	s, _ := NewSketch(opt.Sketch)
	r, _ := NewRecommender(opt)
	add(d, s, r)
	addV1 := func(r *Recommender) {
		// Version 2 is version 1 and the error-ratio count.
		b, _ := r.MarshalBinary()
		b = slices.Clone(b[:len(b)-len(binary.AppendVarint(nil, int64(r.errAbove)))])
		b[0] = 1
		seeds = append(seeds, b, b[:len(b)-len(binary.AppendVarint(nil, int64(r.above)))])
	}
	addV1(r)
	for i := range 400 {
		// Every 5 minutes for 33 hours: past the daily season.
		ts := time.Unix(int64(i*300), 0)
		d.Observe(ts, float64(i%5)+float64(i%288)/100)
		s.Add(ts, float64(i%7))
		errs := 0.001
		if i%50 >= 46 {
			errs = 0.005 // held out: above the warn level
		}
		r.Observe(Interval{Time: ts, Throughput: 10, ErrorRatio: errs, LatencyP50: 0.01, LatencyP99: 0.05 + float64(i%3)/100})
		if i == 20 || i == 399 {
			add(d, s, r)
			addV1(r)
		}
	}
	return opt, seeds
}

// checkState decodes b as each kind of state: a refusal wraps ErrState;
// what is accepted encodes to bytes that are accepted again and encode to
// the same bytes (decode(encode(x)) = x; b need not be canonical: a long
// varint), and gives a detector, sketch or recommender that still scores
// in [0, 1].
func checkState(t *testing.T, opt RecommenderOptions, b []byte) {
	type state interface {
		MarshalBinary() ([]byte, error)
		UnmarshalBinary([]byte) error
	}
	fresh := func(i int) state {
		switch i {
		case 0:
			d, _ := New(opt.Detector)
			return d
		case 1:
			s, _ := NewSketch(opt.Sketch)
			return s
		}
		r, _ := NewRecommender(opt)
		return r
	}
	for i := range 3 {
		st := fresh(i)
		if err := st.UnmarshalBinary(b); err != nil {
			if !errors.Is(err, ErrState) {
				t.Fatalf("%T: error %v does not wrap ErrState", st, err)
			}
			continue
		}
		enc, _ := st.MarshalBinary()
		again := fresh(i)
		if err := again.UnmarshalBinary(enc); err != nil {
			t.Fatalf("%T: re-encoded state refused: %v", st, err)
		}
		if b2, _ := again.MarshalBinary(); string(b2) != string(enc) {
			t.Fatalf("%T: state does not survive a round trip", st)
		}
		switch st := st.(type) {
		case *Detector:
			if res := st.Observe(time.Unix(1e6, 0), 1); !(res.Score >= 0 && res.Score <= 1) {
				t.Fatalf("restored detector scores %v", res.Score)
			}
		case *Sketch:
			st.Add(time.Unix(1e6, 0), 1)
			st.Quantile(0.5)
		case *Recommender:
			st.Observe(Interval{Time: time.Unix(1e6, 0), Throughput: 1, LatencyP50: 0.01, LatencyP99: 0.02})
			rec := st.Recommend()
			if math.IsNaN(rec.ErrorWarn) || math.IsNaN(rec.LatencyWarn) {
				t.Fatalf("restored recommender recommends NaN: %+v", rec)
			}
		}
	}
}

// FuzzUnmarshalState: arbitrary bytes never panic, and what is accepted
// passes checkState. The seeds are the valid states of fuzzStates.
func FuzzUnmarshalState(f *testing.F) {
	opt, seeds := fuzzStates()
	for _, b := range seeds {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkState(t, opt, b) })
}

// FuzzPatchedState: a valid state (one of fuzzStates, picked by seed) with
// patch written over it at an offset, and cut short if cut is less than its
// length, passes checkState. The input is a few bytes, so the fuzzer
// mutates and minimizes it quickly, and every mutation lands past a valid
// header inside a detector, sketch or recommender, where
// FuzzUnmarshalState's kilobyte inputs are mostly spent minimizing.
func FuzzPatchedState(f *testing.F) {
	opt, seeds := fuzzStates()
	for i, b := range seeds {
		f.Add(uint8(i), uint16(len(b)/2), []byte{0xff}, uint16(len(b)))
		f.Add(uint8(i), uint16(2), []byte{0}, uint16(len(b)))
		f.Add(uint8(i), uint16(len(b)-1), []byte{}, uint16(len(b)-1))
	}
	f.Fuzz(func(t *testing.T, seed uint8, at uint16, patch []byte, cut uint16) {
		b := seeds[int(seed)%len(seeds)]
		off := int(at) % (len(b) + 1)
		b = slices.Concat(b[:off], patch, b[min(len(b), off+len(patch)):])
		if int(cut) < len(b) {
			b = b[:cut]
		}
		checkState(t, opt, b)
	})
}

// v1StateOptions and v1StateInterval are the options and intervals (0 to
// 759) of testdata/state/recommender-v1.bin, a recommender state written by
// format version 1 and kept to check that it still restores: never
// regenerate it.
func v1StateOptions() RecommenderOptions {
	o := DefaultRecommenderOptions()
	o.MinSamples = 500
	return o
}

func v1StateInterval(i int) Interval {
	x := float64(i)
	p99 := 0.1 + 0.01*math.Sin(0.7*x)
	if i >= 700 {
		p99 = 0.3
	}
	return Interval{
		Time:       time.Unix(1.7e9, 0).Add(time.Duration(i) * 30 * time.Second),
		Throughput: 100 + 10*math.Sin(1.3*x),
		ErrorRatio: 0.002 + 0.0005*math.Sin(0.9*x),
		LatencyP50: p99 / 3,
		LatencyP99: p99,
	}
}

// TestRecommenderStateOfVersion1Restores: states written by format version
// 1, with and without the count of intervals above the latency warn level
// (testdata/state/recommender-v1.bin holds v1StateInterval 0 to 759 under
// v1StateOptions), restore with nothing counted above the error-ratio warn
// level, and continue as a recommender that saw the same intervals.
func TestRecommenderStateOfVersion1Restores(t *testing.T) {
	v1, err := os.ReadFile("testdata/state/recommender-v1.bin")
	require.NoError(t, err)
	require.Equal(t, byte(1), v1[0])
	o := v1StateOptions()
	want, err := NewRecommender(o)
	require.NoError(t, err)
	for i := range 760 {
		want.Observe(v1StateInterval(i))
	}
	require.Equal(t, 60, want.above)
	require.Zero(t, want.errAbove)

	t.Run("with the latency count", func(t *testing.T) {
		r, err := RestoreRecommender(o, v1)
		require.NoError(t, err)
		require.Equal(t, 60, r.above)
		require.Zero(t, r.errAbove)
		got, _ := r.MarshalBinary()
		wantB, _ := want.MarshalBinary()
		require.Equal(t, wantB, got, "restored state differs from one that saw the same intervals")
		require.Equal(t, byte(StateVersion), got[0])
	})
	t.Run("before the latency count", func(t *testing.T) {
		r, err := RestoreRecommender(o, v1[:len(v1)-1]) // the count, 60, is one byte
		require.NoError(t, err)
		require.Zero(t, r.above)
		require.Zero(t, r.errAbove)
		require.Equal(t, want.Recommend(), r.Recommend())
	})
}

// TestRecommenderStateRefused: a newer format version, and a version 2
// state cut short of a count, are refused and leave the receiver as it was.
func TestRecommenderStateRefused(t *testing.T) {
	o := v1StateOptions()
	r, err := NewRecommender(o)
	require.NoError(t, err)
	for i := range 760 {
		r.Observe(v1StateInterval(i))
	}
	good, err := r.MarshalBinary()
	require.NoError(t, err)
	tests := []struct {
		name string
		b    []byte
		want string
	}{
		{"newer version", append([]byte{StateVersion + 1}, good[1:]...), "format version 3 is newer than this release reads (1 to 2)"},
		{"version 0", append([]byte{0}, good[1:]...), "format version 0, want 1 to 2"},
		{"version 2 without counts", good[:len(good)-2], "intervals above the latency warn level: truncated"},
		{"version 2 without the error count", good[:len(good)-1], "intervals above the error ratio warn level: truncated"},
		{"version 1 with trailing bytes", append([]byte{1}, good[1:]...), "trailing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			into, err := NewRecommender(o)
			require.NoError(t, err)
			before, _ := into.MarshalBinary()
			err = into.UnmarshalBinary(tt.b)
			require.ErrorIs(t, err, ErrState)
			require.ErrorContains(t, err, tt.want)
			after, _ := into.MarshalBinary()
			require.Equal(t, before, after, "refused state changed the recommender")
		})
	}
}
