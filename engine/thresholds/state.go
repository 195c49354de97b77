package thresholds

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"time"

	"governor.dev/governor/internal/statecodec"
)

// ErrState reports a state that cannot be restored: truncated or corrupt
// bytes, another format version, or state saved under other options (a
// detector's seasonal profiles, a sketch's buckets). Returned errors wrap it
// and say what is wrong.
var ErrState = errors.New("thresholds: cannot restore state")

// StateVersion is the newest state format version: UnmarshalBinary reads
// versions 1 to StateVersion and refuses newer ones (saved by a newer
// release). Version 2 added the recommender's count of intervals above the
// error-ratio warn level; a version 1 recommender state restores with that
// count at zero. Detector and Sketch states, unchanged since version 1, are
// still written as version 1, so a release that reads only version 1 (one
// rolled back to) restores them.
const StateVersion = 2

// Format versions each kind of state is written in.
const (
	detectorVersion    = 1
	sketchVersion      = 1
	recommenderVersion = StateVersion
)

// Kinds of state, the first byte after the version.
const (
	kindDetector    = 'D'
	kindSketch      = 'S'
	kindRecommender = 'R'
)

// MaxStateBytes bounds what UnmarshalBinary accepts: far above what the
// default options produce (a few tens of KiB), far below what could hurt.
const MaxStateBytes = 4 << 20

// enc appends the fields of a state: the shared encoding
// (internal/statecodec) plus sparse slices, bitmaps and robust estimates.
type enc struct{ statecodec.Enc }

// floats writes a slice sparsely: its length, then (gap, value) for every
// non-zero value, ended by a gap of 0. Decayed histograms are mostly zero.
func (e *enc) floats(s []float64) {
	e.U(uint64(len(s)))
	last := -1
	for i, v := range s {
		if v != 0 {
			e.U(uint64(i - last))
			e.F(v)
			last = i
		}
	}
	e.U(0)
}

// bits writes a slice of booleans as its length and a bitmap.
func (e *enc) bits(s []bool) {
	e.U(uint64(len(s)))
	for i := 0; i < len(s); i += 8 {
		var b byte
		for j := 0; j < 8 && i+j < len(s); j++ {
			if s[i+j] {
				b |= 1 << j
			}
		}
		e.B = append(e.B, b)
	}
}

func (e *enc) robust(r robust) { e.F(r.mean); e.F(r.mad); e.I(int64(r.n)) }

// dec reads the fields of a state; the first error sticks and later reads
// return zeros.
type dec struct{ statecodec.Dec }

// n reads a count in [0, limit], written as a signed varint.
func (d *dec) n(what string, limit int) int {
	v := d.I(what)
	if v < 0 || v > int64(limit) {
		d.Fail("%s %d: want 0..%d", what, v, limit)
		return 0
	}
	return int(v)
}

// floats reads a slice written by enc.floats into s, whose length it must
// have.
func (d *dec) floats(what string, s []float64) {
	if n := d.U(what + " length"); d.Err == nil && n != uint64(len(s)) {
		d.Fail("%s: %d values, want %d (saved under other options)", what, n, len(s))
		return
	}
	clear(s)
	i := -1
	for d.Err == nil {
		gap := d.U(what + " gap")
		if gap == 0 {
			return
		}
		if gap > uint64(len(s)-1-i) {
			d.Fail("%s: index beyond %d values", what, len(s))
			return
		}
		i += int(gap)
		if s[i] = d.F(what); d.Err == nil && s[i] == 0 {
			d.Fail("%s: a stored zero at %d", what, i)
		}
	}
}

// bits reads a bitmap written by enc.bits into s, whose length it must
// have, and returns how many are set.
func (d *dec) bits(what string, s []bool) int {
	if n := d.U(what + " length"); d.Err == nil && n != uint64(len(s)) {
		d.Fail("%s: %d values, want %d (saved under other options)", what, n, len(s))
	}
	nb := (len(s) + 7) / 8
	if d.Err != nil {
		return 0
	}
	if len(d.B) < nb {
		d.Fail("%s: truncated", what)
		return 0
	}
	set := 0
	for i := range s {
		s[i] = d.B[i/8]&(1<<(i%8)) != 0
		if s[i] {
			set++
		}
	}
	if len(s)%8 != 0 && d.B[nb-1]>>(len(s)%8) != 0 {
		d.Fail("%s: bits set beyond %d values", what, len(s))
	}
	d.B = d.B[nb:]
	return set
}

func (d *dec) robust(what string, r *robust) {
	r.mean, r.mad, r.n = d.F(what+" mean"), d.F(what+" spread"), d.n(what+" samples", math.MaxInt32)
	if r.mad < 0 {
		d.Fail("%s spread %v: want >= 0", what, r.mad)
	}
}

// header checks the version and kind and the fingerprint of the options,
// and returns the version.
func (d *dec) header(kind byte, fp uint64) (version byte) {
	if len(d.B) > MaxStateBytes {
		d.Fail("%d bytes, more than %d", len(d.B), MaxStateBytes)
		return 0
	}
	if len(d.B) < 2 {
		d.Fail("truncated header")
		return 0
	}
	switch version = d.B[0]; {
	case version > StateVersion:
		d.Fail("format version %d is newer than this release reads (1 to %d): saved by a newer release", version, StateVersion)
		return 0
	case version < 1:
		d.Fail("format version %d, want 1 to %d", version, StateVersion)
		return 0
	}
	if d.B[1] != kind {
		d.Fail("kind %q, want %q", d.B[1], kind)
		return 0
	}
	d.B = d.B[2:]
	if got := d.U("options fingerprint"); d.Err == nil && got != fp {
		d.Fail("saved under other options (fingerprint %x, want %x)", got, fp)
	}
	return version
}

// fingerprint hashes the options a state depends on, so a state is not
// restored into a detector or sketch shaped or tuned differently.
func fingerprint(v any) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%#v", v)
	return h.Sum64() >> 1 // fits a varint comfortably either way
}

// MarshalBinary encodes the detector's learned state (not its options):
// format version 1 (see StateVersion), a fingerprint of the options, then every
// baseline, profile and rarity histogram. Zeros are stored sparsely.
func (d *Detector) MarshalBinary() ([]byte, error) {
	e := enc{statecodec.Enc{B: make([]byte, 0, 1024)}}
	e.B = append(e.B, detectorVersion, kindDetector)
	e.U(fingerprint(d.opt))
	d.encode(&e)
	return e.B, nil
}

func (d *Detector) encode(e *enc) {
	e.robust(d.level)
	e.robust(d.long)
	e.F(d.short)
	e.F(d.mid)
	e.F(d.env.hi)
	e.F(d.env.lo)
	e.I(int64(d.env.n))
	for _, s := range d.season {
		e.floats(s.level)
		e.bits(s.seen)
		e.robust(s.resid)
		e.F(s.sum)
		e.I(int64(s.nseen))
		e.I(s.start)
		e.Bool(s.started)
	}
	for i := range d.rare {
		r := &d.rare[i]
		e.floats(r.tree[:])
		e.F(r.total)
		e.F(r.weight)
		e.F(r.max)
	}
	e.F(d.cusUp)
	e.F(d.cusDn)
	e.F(d.vol.prev)
	e.F(d.vol.recent)
	e.F(d.vol.typical)
	e.I(int64(d.vol.n))
	e.I(int64(d.echo))
	e.I(int64(d.n))
}

// UnmarshalBinary restores a state MarshalBinary wrote into a detector
// made with the same options (New). Bytes of another format version, of
// other options, truncated or corrupt are refused with an error wrapping
// ErrState, and the detector is left as it was.
func (d *Detector) UnmarshalBinary(b []byte) error {
	n, err := RestoreDetector(d.opt, b)
	if err != nil {
		return err
	}
	*d = *n
	return nil
}

// RestoreDetector returns a detector with options opt and the state
// MarshalBinary wrote (New and UnmarshalBinary in one, without a
// throwaway detector).
func RestoreDetector(opt Options, b []byte) (*Detector, error) {
	n, err := New(opt)
	if err != nil {
		return nil, err
	}
	x := dec{statecodec.Dec{B: b, Sentinel: ErrState}}
	x.header(kindDetector, fingerprint(n.opt))
	n.decode(&x)
	if err := x.End(); err != nil {
		return nil, err
	}
	return n, nil
}

func (d *Detector) decode(x *dec) {
	x.robust("level", &d.level)
	x.robust("long-run level", &d.long)
	d.short, d.mid = x.F("short average"), x.F("mid average")
	d.env.hi, d.env.lo, d.env.n = x.F("envelope high"), x.F("envelope low"), x.n("envelope samples", math.MaxInt32)
	for i, s := range d.season {
		w := fmt.Sprintf("season %d", i)
		x.floats(w+" levels", s.level)
		nseen := x.bits(w+" seen", s.seen)
		x.robust(w+" residual", &s.resid)
		s.sum = x.F(w + " sum")
		s.nseen = x.n(w+" bins seen", len(s.seen))
		s.start = x.I(w + " start")
		s.started = x.Bool(w + " started")
		if x.Err == nil && s.nseen != nseen {
			x.Fail("%s: %d bins seen, the profile has %d", w, s.nseen, nseen)
		}
	}
	for i := range d.rare {
		r := &d.rare[i]
		w := fmt.Sprintf("rarity of %s", Feature(i))
		x.floats(w, r.tree[:])
		r.total, r.weight, r.max = x.F(w+" total"), x.F(w+" weight"), x.F(w+" max")
		switch {
		case x.Err != nil:
		case !(r.weight > 0):
			x.Fail("%s weight %v: want > 0", w, r.weight)
		case slices.ContainsFunc(r.tree[:], func(v float64) bool { return !(v >= 0) }):
			// Counts never go negative: a sign flipped in storage would
			// make every surprisal NaN, and the detector blind.
			x.Fail("%s: a negative count", w)
		case !(r.total >= 0) || !(r.max >= 0):
			x.Fail("%s total %v, max %v: want >= 0", w, r.total, r.max)
		case math.Abs(r.below(rarityBins)-r.total) > 1e-6*math.Max(1, r.total):
			x.Fail("%s total %v: the bins hold %v", w, r.total, r.below(rarityBins))
		}
	}
	d.cusUp, d.cusDn = x.F("cusum up"), x.F("cusum down")
	d.vol.prev, d.vol.recent, d.vol.typical = x.F("volatility previous"), x.F("volatility recent"), x.F("volatility typical")
	d.vol.n = x.n("volatility samples", math.MaxInt32)
	d.echo = x.n("echo", math.MaxInt)
	d.n = x.n("samples", math.MaxInt32)
}

// MarshalBinary encodes the sketch's counts and decay state: format
// version 1 (see StateVersion), a fingerprint of the options, the non-zero buckets.
func (s *Sketch) MarshalBinary() ([]byte, error) {
	e := enc{statecodec.Enc{B: make([]byte, 0, 256)}}
	e.B = append(e.B, sketchVersion, kindSketch)
	e.U(fingerprint(s.opt))
	s.encode(&e)
	return e.B, nil
}

func (s *Sketch) encode(e *enc) {
	e.floats(s.counts)
	e.F(s.total)
	e.I(int64(s.samples))
	e.I(s.origin.UnixNano())
	e.F(s.log2Scale)
	e.Bool(s.started)
	e.I(s.latest.UnixNano())
}

// UnmarshalBinary restores a state MarshalBinary wrote into a sketch made
// with the same options (NewSketch); anything else is refused with an
// error wrapping ErrState and the sketch is left as it was.
func (s *Sketch) UnmarshalBinary(b []byte) error {
	x := dec{statecodec.Dec{B: b, Sentinel: ErrState}}
	x.header(kindSketch, fingerprint(s.opt))
	n, err := NewSketch(s.opt)
	if err != nil {
		return err
	}
	n.decode(&x)
	if err := x.End(); err != nil {
		return err
	}
	*s = *n
	return nil
}

func (s *Sketch) decode(x *dec) {
	x.floats("sketch counts", s.counts)
	for i, c := range s.counts {
		if c < 0 {
			x.Fail("sketch count %d is %v: want >= 0", i, c)
			return
		}
	}
	s.total = x.F("sketch total")
	s.samples = x.n("sketch samples", math.MaxInt32)
	s.origin = time.Unix(0, x.I("sketch origin"))
	s.log2Scale = x.F("sketch scale")
	s.started = x.Bool("sketch started")
	s.latest = time.Unix(0, x.I("sketch latest"))
	if x.Err == nil && (s.total < 0 || s.latest.Before(s.origin)) {
		x.Fail("sketch total %v, origin %s, latest %s: want total >= 0, latest not before origin", s.total, s.origin, s.latest)
	}
}

// MarshalBinary encodes everything the recommender learned (its detector,
// sketches, spreads and counts): format version StateVersion and a
// fingerprint of the options first. A release reading only version 1
// refuses it.
func (r *Recommender) MarshalBinary() ([]byte, error) {
	e := enc{statecodec.Enc{B: make([]byte, 0, 2048)}}
	e.B = append(e.B, recommenderVersion, kindRecommender)
	e.U(fingerprint(r.opt))
	r.detector.encode(&e)
	for _, s := range r.sketches() {
		s.encode(&e)
	}
	e.robust(r.p99Spread)
	e.robust(r.errSpread)
	e.I(int64(r.healthy))
	e.I(int64(r.total))
	e.I(int64(r.above))
	e.I(int64(r.errAbove)) // since version 2
	return e.B, nil
}

func (r *Recommender) sketches() []*Sketch { return []*Sketch{r.p50, r.p99, r.throughput, r.errs} }

// UnmarshalBinary restores a state MarshalBinary wrote into a recommender
// made with the same options (NewRecommender); anything else is refused
// with an error wrapping ErrState and the recommender is left as it was.
func (r *Recommender) UnmarshalBinary(b []byte) error {
	n, err := RestoreRecommender(r.opt, b)
	if err != nil {
		return err
	}
	*r = *n
	return nil
}

// RestoreRecommender returns a recommender with options opt and the state
// MarshalBinary wrote (NewRecommender and UnmarshalBinary in one). A
// version 1 state restores with no interval counted above the error-ratio
// warn level (version 1 did not keep the count), nor above the latency one
// if it was saved before that count was kept.
func RestoreRecommender(opt RecommenderOptions, b []byte) (*Recommender, error) {
	n, err := NewRecommender(opt)
	if err != nil {
		return nil, err
	}
	x := dec{statecodec.Dec{B: b, Sentinel: ErrState}}
	version := x.header(kindRecommender, fingerprint(n.opt))
	n.detector.decode(&x)
	for _, s := range n.sketches() {
		s.decode(&x)
	}
	x.robust("p99 spread", &n.p99Spread)
	x.robust("error ratio spread", &n.errSpread)
	n.healthy = x.n("healthy intervals", math.MaxInt32)
	n.total = x.n("intervals", math.MaxInt32)
	if version >= 2 || (x.Err == nil && len(x.B) > 0) {
		// Absent from version 1 states saved before it was kept: none
		// above.
		n.above = x.n("intervals above the latency warn level", math.MaxInt32)
	}
	if version >= 2 {
		n.errAbove = x.n("intervals above the error ratio warn level", math.MaxInt32)
	}
	if x.Err == nil && n.healthy > n.total {
		x.Fail("%d healthy intervals of %d: want at most all", n.healthy, n.total)
	}
	if err := x.End(); err != nil {
		return nil, err
	}
	return n, nil
}
