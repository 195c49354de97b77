package statecodec

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

var errTest = errors.New("test state")

func FuzzRoundTrip(f *testing.F) {
	f.Add(uint64(0), int64(-1), 1.5, "svc", true)
	f.Add(uint64(math.MaxUint64), int64(math.MinInt64), -0.0, "", false)
	f.Fuzz(func(t *testing.T, u uint64, i int64, fl float64, s string, b bool) {
		var e Enc
		e.U(u)
		e.I(i)
		e.F(fl)
		e.S(s)
		e.Bool(b)
		d := Dec{B: e.B, Sentinel: errTest}
		gu, gi, gf, gs, gb := d.U("u"), d.I("i"), d.F("f"), d.S("s", len(s)), d.Bool("b")
		err := d.End()
		if math.IsNaN(fl) || math.IsInf(fl, 0) {
			if !errors.Is(err, errTest) || !strings.Contains(err.Error(), "f:") {
				t.Fatalf("non-finite float accepted: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if gu != u || gi != i || gf != fl || gs != s || gb != b {
			t.Fatalf("round trip: got %v %v %v %q %v, want %v %v %v %q %v", gu, gi, gf, gs, gb, u, i, fl, s, b)
		}
	})
}

// fields is one of each field FuzzDecode reads, in its order.
type fields struct {
	u  uint64
	i  int64
	n  int
	f  float64
	s  string
	b  bool
	at time.Time
}

func (v fields) encode() []byte {
	var e Enc
	e.U(v.u)
	e.I(v.i)
	e.U(uint64(v.n))
	e.F(v.f)
	e.S(v.s)
	e.Bool(v.b)
	e.Time(v.at)
	return e.B
}

func decodeFields(b []byte) (fields, error) {
	d := Dec{B: b, Sentinel: errTest}
	v := fields{u: d.U("u"), i: d.I("i"), n: d.N("n", 10), f: d.F("f"), s: d.S("s", 64), b: d.Bool("b"), at: d.Time("at")}
	return v, d.End()
}

// FuzzDecode: arbitrary bytes never panic the decoder, every error wraps
// the sentinel, and what it accepts encodes to bytes that decode to the
// same fields and encode to the same bytes again. The seeds are valid
// encodings (every field, extreme values included) and truncated or
// corrupted ones, so that mutations start past the first field.
func FuzzDecode(f *testing.F) {
	valid := []fields{
		{},
		{u: 1, i: -1, n: 10, f: 1.5, s: "checkout/db", b: true, at: time.Unix(1767225600, 123)},
		{u: math.MaxUint64, i: math.MinInt64, n: 3, f: -math.MaxFloat64, s: strings.Repeat("x", 64), at: time.Unix(0, math.MaxInt64)},
		{u: 1 << 35, i: math.MaxInt64, f: math.SmallestNonzeroFloat64, s: "é", b: true, at: time.Unix(0, 1)},
	}
	for _, v := range valid {
		b := v.encode()
		f.Add(b)
		f.Add(b[:len(b)/2])                 // truncated
		f.Add(append(b[:len(b):len(b)], 0)) // a trailing byte
	}
	f.Add([]byte{1, 2, 3})
	f.Add([]byte{0, 0, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}) // n beyond its limit
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0xf8, 0x7f, 0, 2})  // NaN
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := decodeFields(b)
		if err != nil {
			if !errors.Is(err, errTest) {
				t.Fatalf("error does not wrap the sentinel: %v", err)
			}
			return
		}
		// Bytes need not be canonical (a long varint), but what they
		// decode to survives a round trip.
		enc := v.encode()
		again, err := decodeFields(enc)
		if err != nil {
			t.Fatalf("re-encoded fields refused: %v", err)
		}
		if again.u != v.u || again.i != v.i || again.n != v.n || again.f != v.f || again.s != v.s || again.b != v.b || !again.at.Equal(v.at) {
			t.Fatalf("round trip: got %+v, want %+v", again, v)
		}
		if string(again.encode()) != string(enc) {
			t.Fatal("decoded fields encode to other bytes")
		}
	})
}

func TestErrorsNameTheField(t *testing.T) {
	d := Dec{B: []byte{5, 'a'}, Sentinel: errTest}
	if d.S("service", 4); d.Err == nil || !strings.Contains(d.Err.Error(), "service length 5: want at most 4") {
		t.Fatalf("got %v", d.Err)
	}
	d = Dec{B: []byte{2}, Sentinel: errTest}
	if d.Bool("open"); !errors.Is(d.Err, errTest) || !strings.Contains(d.Err.Error(), "open: want 0 or 1") {
		t.Fatalf("got %v", d.Err)
	}
	d = Dec{B: []byte{0, 9}, Sentinel: errTest}
	d.U("count")
	if err := d.End(); err == nil || !strings.Contains(err.Error(), "1 trailing bytes") {
		t.Fatalf("got %v", err)
	}
	if d.U("after") != 0 || !strings.Contains(d.Err.Error(), "trailing") {
		t.Fatal("the first error must stick")
	}
}

// FuzzTime: a time in the representable range survives Enc.Time and
// Dec.Time (in UTC); the zero time stays zero.
func FuzzTime(f *testing.F) {
	f.Add(int64(0), false)
	f.Add(int64(1767225600123456789), true)
	f.Add(int64(math.MinInt64), true)
	f.Fuzz(func(t *testing.T, ns int64, set bool) {
		var in time.Time
		if set {
			in = time.Unix(0, ns)
		}
		var e Enc
		e.Time(in)
		d := Dec{B: e.B, Sentinel: errTest}
		got := d.Time("at")
		if err := d.End(); err != nil {
			t.Fatal(err)
		}
		if !got.Equal(in) || got.IsZero() != in.IsZero() || (!got.IsZero() && got.Location() != time.UTC) {
			t.Fatalf("round trip of %v: got %v", in, got)
		}
	})
}

// A varint longer than 64 bits is corrupt, not cut short: the error says
// so, for the unsigned and the signed reader.
func TestOverlongVarintIsNotReportedAsTruncated(t *testing.T) {
	overlong := append(bytes.Repeat([]byte{0xff}, 10), 0x01)
	for name, read := range map[string]func(*Dec){
		"U": func(d *Dec) { d.U("count") },
		"I": func(d *Dec) { d.I("count") },
	} {
		d := Dec{B: overlong, Sentinel: errTest}
		read(&d)
		if d.Err == nil || !strings.Contains(d.Err.Error(), "count: varint overflows 64 bits") {
			t.Errorf("%s: got %v", name, d.Err)
		}
	}
}

func TestTimeTruncated(t *testing.T) {
	d := Dec{B: []byte{1}, Sentinel: errTest}
	if got := d.Time("last update"); !got.IsZero() || !errors.Is(d.Err, errTest) || !strings.Contains(d.Err.Error(), "last update: truncated") {
		t.Fatalf("got %v, %v", got, d.Err)
	}
}
