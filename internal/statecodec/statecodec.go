// Package statecodec is the compact binary encoding of the engine's
// persisted state (engine/thresholds detectors and sketches, the
// evaluator's event state): unsigned and signed varints, little-endian
// float64s, length-prefixed strings, one-byte booleans and times.
//
// Dec reads with a sticky error: the first problem is kept, wrapped in the
// caller's sentinel error and naming the field, and every later read
// returns a zero value, so a decoder reads straight through and checks
// Err (or End) once.
package statecodec

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// Enc appends fields to B.
type Enc struct{ B []byte }

// U appends an unsigned varint.
func (e *Enc) U(v uint64) { e.B = binary.AppendUvarint(e.B, v) }

// I appends a signed varint.
func (e *Enc) I(v int64) { e.B = binary.AppendVarint(e.B, v) }

// F appends a float64, little-endian.
func (e *Enc) F(v float64) { e.B = binary.LittleEndian.AppendUint64(e.B, math.Float64bits(v)) }

// S appends a string as its length (unsigned varint) and its bytes.
func (e *Enc) S(v string) { e.U(uint64(len(v))); e.B = append(e.B, v...) }

// Bool appends 1 or 0.
func (e *Enc) Bool(v bool) {
	if v {
		e.B = append(e.B, 1)
	} else {
		e.B = append(e.B, 0)
	}
}

// Dec reads fields from B. Sentinel is wrapped by every error it reports.
type Dec struct {
	B        []byte
	Err      error
	Sentinel error
}

// Fail records the first error: the sentinel and what is wrong.
func (d *Dec) Fail(format string, args ...any) {
	if d.Err == nil {
		d.Err = fmt.Errorf("%w: %s", d.Sentinel, fmt.Sprintf(format, args...))
	}
}

// U reads an unsigned varint.
func (d *Dec) U(what string) uint64 {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.B)
	if n <= 0 {
		d.varintFail(what, n)
		return 0
	}
	d.B = d.B[n:]
	return v
}

// I reads a signed varint.
func (d *Dec) I(what string) int64 {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Varint(d.B)
	if n <= 0 {
		d.varintFail(what, n)
		return 0
	}
	d.B = d.B[n:]
	return v
}

// varintFail records why a varint could not be read: n is what
// binary.Uvarint or binary.Varint returned (0 or negative).
func (d *Dec) varintFail(what string, n int) {
	if n == 0 {
		d.Fail("%s: truncated", what)
	} else {
		d.Fail("%s: varint overflows 64 bits", what)
	}
}

// N reads a count (unsigned varint) in [0, limit].
func (d *Dec) N(what string, limit int) int {
	v := d.U(what)
	if d.Err == nil && v > uint64(limit) {
		d.Fail("%s %d: want at most %d", what, v, limit)
		return 0
	}
	return int(v)
}

// F reads a finite float64.
func (d *Dec) F(what string) float64 {
	if d.Err != nil {
		return 0
	}
	if len(d.B) < 8 {
		d.Fail("%s: truncated", what)
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.B))
	d.B = d.B[8:]
	if math.IsNaN(v) || math.IsInf(v, 0) {
		d.Fail("%s: %v, want a finite number", what, v)
		return 0
	}
	return v
}

// S reads a string of at most limit bytes.
func (d *Dec) S(what string, limit int) string {
	n := d.N(what+" length", limit)
	if d.Err != nil {
		return ""
	}
	if len(d.B) < n {
		d.Fail("%s: truncated", what)
		return ""
	}
	v := string(d.B[:n])
	d.B = d.B[n:]
	return v
}

// Bool reads a byte that must be 0 or 1.
func (d *Dec) Bool(what string) bool {
	if d.Err != nil {
		return false
	}
	if len(d.B) < 1 || d.B[0] > 1 {
		d.Fail("%s: want 0 or 1", what)
		return false
	}
	v := d.B[0] == 1
	d.B = d.B[1:]
	return v
}

// End fails on trailing bytes and returns the first error.
func (d *Dec) End() error {
	if d.Err == nil && len(d.B) > 0 {
		d.Fail("%d trailing bytes", len(d.B))
	}
	return d.Err
}

// Time appends a time as a flag (0 for the zero time) and, unless zero,
// its Unix time in nanoseconds (a signed varint). The location and the
// monotonic reading are not kept; times outside the years 1678 to 2262 do
// not survive.
func (e *Enc) Time(t time.Time) {
	if t.IsZero() {
		e.Bool(false)
		return
	}
	e.Bool(true)
	e.I(t.UnixNano())
}

// Time reads what Enc.Time wrote: the zero time, or a time in UTC.
func (d *Dec) Time(what string) time.Time {
	if !d.Bool(what) {
		return time.Time{}
	}
	ns := d.I(what)
	if d.Err != nil {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}
