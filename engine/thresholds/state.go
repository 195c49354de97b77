package thresholds

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"time"
)

// ErrState reports a state that cannot be restored: truncated or corrupt
// bytes, another format version, or state saved under other options (a
// detector's seasonal profiles, a sketch's buckets). Returned errors wrap it
// and say what is wrong.
var ErrState = errors.New("thresholds: cannot restore state")

// StateVersion is the format version of the bytes MarshalBinary writes.
const StateVersion = 1

// Kinds of state, the first byte after the version.
const (
	kindDetector    = 'D'
	kindSketch      = 'S'
	kindRecommender = 'R'
)

// MaxStateBytes bounds what UnmarshalBinary accepts: far above what the
// default options produce (a few tens of KiB), far below what could hurt.
const MaxStateBytes = 4 << 20

// enc appends the fields of a state.
type enc struct{ b []byte }

func (e *enc) u(v uint64)  { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) i(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) f(v float64) { e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(v)) }
func (e *enc) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

// floats writes a slice sparsely: its length, then (gap, value) for every
// non-zero value, ended by a gap of 0. Decayed histograms are mostly zero.
func (e *enc) floats(s []float64) {
	e.u(uint64(len(s)))
	last := -1
	for i, v := range s {
		if v != 0 {
			e.u(uint64(i - last))
			e.f(v)
			last = i
		}
	}
	e.u(0)
}

// bits writes a slice of booleans as its length and a bitmap.
func (e *enc) bits(s []bool) {
	e.u(uint64(len(s)))
	for i := 0; i < len(s); i += 8 {
		var b byte
		for j := 0; j < 8 && i+j < len(s); j++ {
			if s[i+j] {
				b |= 1 << j
			}
		}
		e.b = append(e.b, b)
	}
}

func (e *enc) robust(r robust) { e.f(r.mean); e.f(r.mad); e.i(int64(r.n)) }

// dec reads the fields of a state; the first error sticks and later reads
// return zeros.
type dec struct {
	b   []byte
	err error
}

func (d *dec) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrState, fmt.Sprintf(format, args...))
	}
}

func (d *dec) u(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("%s: truncated", what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) i(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("%s: truncated", what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// n reads a count in [0, limit].
func (d *dec) n(what string, limit int) int {
	v := d.i(what)
	if v < 0 || v > int64(limit) {
		d.fail("%s %d: want 0..%d", what, v, limit)
		return 0
	}
	return int(v)
}

// f reads a finite float.
func (d *dec) f(what string) float64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.fail("%s: truncated", what)
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
	d.b = d.b[8:]
	if math.IsNaN(v) || math.IsInf(v, 0) {
		d.fail("%s: %v, want a finite number", what, v)
		return 0
	}
	return v
}

func (d *dec) bool(what string) bool {
	if d.err != nil {
		return false
	}
	if len(d.b) < 1 || d.b[0] > 1 {
		d.fail("%s: want 0 or 1", what)
		return false
	}
	v := d.b[0] == 1
	d.b = d.b[1:]
	return v
}

// floats reads a slice written by enc.floats into s, whose length it must
// have.
func (d *dec) floats(what string, s []float64) {
	if n := d.u(what + " length"); d.err == nil && n != uint64(len(s)) {
		d.fail("%s: %d values, want %d (saved under other options)", what, n, len(s))
		return
	}
	clear(s)
	i := -1
	for d.err == nil {
		gap := d.u(what + " gap")
		if gap == 0 {
			return
		}
		if gap > uint64(len(s)-1-i) {
			d.fail("%s: index beyond %d values", what, len(s))
			return
		}
		i += int(gap)
		if s[i] = d.f(what); d.err == nil && s[i] == 0 {
			d.fail("%s: a stored zero at %d", what, i)
		}
	}
}

// bits reads a bitmap written by enc.bits into s, whose length it must
// have, and returns how many are set.
func (d *dec) bits(what string, s []bool) int {
	if n := d.u(what + " length"); d.err == nil && n != uint64(len(s)) {
		d.fail("%s: %d values, want %d (saved under other options)", what, n, len(s))
	}
	nb := (len(s) + 7) / 8
	if d.err != nil {
		return 0
	}
	if len(d.b) < nb {
		d.fail("%s: truncated", what)
		return 0
	}
	set := 0
	for i := range s {
		s[i] = d.b[i/8]&(1<<(i%8)) != 0
		if s[i] {
			set++
		}
	}
	if len(s)%8 != 0 && d.b[nb-1]>>(len(s)%8) != 0 {
		d.fail("%s: bits set beyond %d values", what, len(s))
	}
	d.b = d.b[nb:]
	return set
}

func (d *dec) robust(what string, r *robust) {
	r.mean, r.mad, r.n = d.f(what+" mean"), d.f(what+" spread"), d.n(what+" samples", math.MaxInt32)
	if r.mad < 0 {
		d.fail("%s spread %v: want >= 0", what, r.mad)
	}
}

// header checks the version and kind and the fingerprint of the options.
func (d *dec) header(kind byte, fp uint64) {
	if len(d.b) > MaxStateBytes {
		d.fail("%d bytes, more than %d", len(d.b), MaxStateBytes)
		return
	}
	if len(d.b) < 2 {
		d.fail("truncated header")
		return
	}
	if d.b[0] != StateVersion {
		d.fail("format version %d, want %d", d.b[0], StateVersion)
		return
	}
	if d.b[1] != kind {
		d.fail("kind %q, want %q", d.b[1], kind)
		return
	}
	d.b = d.b[2:]
	if got := d.u("options fingerprint"); d.err == nil && got != fp {
		d.fail("saved under other options (fingerprint %x, want %x)", got, fp)
	}
}

func (d *dec) end() error {
	if d.err == nil && len(d.b) > 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	return d.err
}

// fingerprint hashes the options a state depends on, so a state is not
// restored into a detector or sketch shaped or tuned differently.
func fingerprint(v any) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%#v", v)
	return h.Sum64() >> 1 // fits a varint comfortably either way
}

// MarshalBinary encodes the detector's learned state (not its options):
// format version StateVersion, a fingerprint of the options, then every
// baseline, profile and rarity histogram. Zeros are stored sparsely.
func (d *Detector) MarshalBinary() ([]byte, error) {
	e := enc{b: make([]byte, 0, 1024)}
	e.b = append(e.b, StateVersion, kindDetector)
	e.u(fingerprint(d.opt))
	d.encode(&e)
	return e.b, nil
}

func (d *Detector) encode(e *enc) {
	e.robust(d.level)
	e.robust(d.long)
	e.f(d.short)
	e.f(d.mid)
	e.f(d.env.hi)
	e.f(d.env.lo)
	e.i(int64(d.env.n))
	for _, s := range d.season {
		e.floats(s.level)
		e.bits(s.seen)
		e.robust(s.resid)
		e.f(s.sum)
		e.i(int64(s.nseen))
		e.i(s.start)
		e.bool(s.started)
	}
	for i := range d.rare {
		r := &d.rare[i]
		e.floats(r.tree[:])
		e.f(r.total)
		e.f(r.weight)
		e.f(r.max)
	}
	e.f(d.cusUp)
	e.f(d.cusDn)
	e.f(d.vol.prev)
	e.f(d.vol.recent)
	e.f(d.vol.typical)
	e.i(int64(d.vol.n))
	e.i(int64(d.echo))
	e.i(int64(d.n))
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
	x := dec{b: b}
	x.header(kindDetector, fingerprint(n.opt))
	n.decode(&x)
	if err := x.end(); err != nil {
		return nil, err
	}
	return n, nil
}

func (d *Detector) decode(x *dec) {
	x.robust("level", &d.level)
	x.robust("long-run level", &d.long)
	d.short, d.mid = x.f("short average"), x.f("mid average")
	d.env.hi, d.env.lo, d.env.n = x.f("envelope high"), x.f("envelope low"), x.n("envelope samples", math.MaxInt32)
	for i, s := range d.season {
		w := fmt.Sprintf("season %d", i)
		x.floats(w+" levels", s.level)
		nseen := x.bits(w+" seen", s.seen)
		x.robust(w+" residual", &s.resid)
		s.sum = x.f(w + " sum")
		s.nseen = x.n(w+" bins seen", len(s.seen))
		s.start = x.i(w + " start")
		s.started = x.bool(w + " started")
		if x.err == nil && s.nseen != nseen {
			x.fail("%s: %d bins seen, the profile has %d", w, s.nseen, nseen)
		}
	}
	for i := range d.rare {
		r := &d.rare[i]
		w := fmt.Sprintf("rarity of %s", Feature(i))
		x.floats(w, r.tree[:])
		r.total, r.weight, r.max = x.f(w+" total"), x.f(w+" weight"), x.f(w+" max")
		if x.err == nil && !(r.weight > 0) {
			x.fail("%s weight %v: want > 0", w, r.weight)
		}
	}
	d.cusUp, d.cusDn = x.f("cusum up"), x.f("cusum down")
	d.vol.prev, d.vol.recent, d.vol.typical = x.f("volatility previous"), x.f("volatility recent"), x.f("volatility typical")
	d.vol.n = x.n("volatility samples", math.MaxInt32)
	d.echo = x.n("echo", math.MaxInt)
	d.n = x.n("samples", math.MaxInt32)
}

// MarshalBinary encodes the sketch's counts and decay state: format
// version StateVersion, a fingerprint of the options, the non-zero buckets.
func (s *Sketch) MarshalBinary() ([]byte, error) {
	e := enc{b: make([]byte, 0, 256)}
	e.b = append(e.b, StateVersion, kindSketch)
	e.u(fingerprint(s.opt))
	s.encode(&e)
	return e.b, nil
}

func (s *Sketch) encode(e *enc) {
	e.floats(s.counts)
	e.f(s.total)
	e.i(int64(s.samples))
	e.i(s.origin.UnixNano())
	e.f(s.log2Scale)
	e.bool(s.started)
	e.i(s.latest.UnixNano())
}

// UnmarshalBinary restores a state MarshalBinary wrote into a sketch made
// with the same options (NewSketch); anything else is refused with an
// error wrapping ErrState and the sketch is left as it was.
func (s *Sketch) UnmarshalBinary(b []byte) error {
	x := dec{b: b}
	x.header(kindSketch, fingerprint(s.opt))
	n, err := NewSketch(s.opt)
	if err != nil {
		return err
	}
	n.decode(&x)
	if err := x.end(); err != nil {
		return err
	}
	*s = *n
	return nil
}

func (s *Sketch) decode(x *dec) {
	x.floats("sketch counts", s.counts)
	for i, c := range s.counts {
		if c < 0 {
			x.fail("sketch count %d is %v: want >= 0", i, c)
			return
		}
	}
	s.total = x.f("sketch total")
	s.samples = x.n("sketch samples", math.MaxInt32)
	s.origin = time.Unix(0, x.i("sketch origin"))
	s.log2Scale = x.f("sketch scale")
	s.started = x.bool("sketch started")
	s.latest = time.Unix(0, x.i("sketch latest"))
	if x.err == nil && (s.total < 0 || s.latest.Before(s.origin)) {
		x.fail("sketch total %v, origin %s, latest %s: want total >= 0, latest not before origin", s.total, s.origin, s.latest)
	}
}

// MarshalBinary encodes everything the recommender learned (its detector,
// sketches, spreads and counts): format version StateVersion and a
// fingerprint of the options first.
func (r *Recommender) MarshalBinary() ([]byte, error) {
	e := enc{b: make([]byte, 0, 2048)}
	e.b = append(e.b, StateVersion, kindRecommender)
	e.u(fingerprint(r.opt))
	r.detector.encode(&e)
	for _, s := range r.sketches() {
		s.encode(&e)
	}
	e.robust(r.p99Spread)
	e.robust(r.errSpread)
	e.i(int64(r.healthy))
	e.i(int64(r.total))
	return e.b, nil
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
// MarshalBinary wrote (NewRecommender and UnmarshalBinary in one).
func RestoreRecommender(opt RecommenderOptions, b []byte) (*Recommender, error) {
	n, err := NewRecommender(opt)
	if err != nil {
		return nil, err
	}
	x := dec{b: b}
	x.header(kindRecommender, fingerprint(n.opt))
	n.detector.decode(&x)
	for _, s := range n.sketches() {
		s.decode(&x)
	}
	x.robust("p99 spread", &n.p99Spread)
	x.robust("error ratio spread", &n.errSpread)
	n.healthy = x.n("healthy intervals", math.MaxInt32)
	n.total = x.n("intervals", math.MaxInt32)
	if x.err == nil && n.healthy > n.total {
		x.fail("%d healthy intervals of %d: want at most all", n.healthy, n.total)
	}
	if err := x.end(); err != nil {
		return nil, err
	}
	return n, nil
}
