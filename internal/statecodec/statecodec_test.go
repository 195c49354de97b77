package statecodec

import (
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

func FuzzDecode(f *testing.F) {
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		d := Dec{B: b, Sentinel: errTest}
		d.U("u")
		d.I("i")
		d.N("n", 10)
		d.F("f")
		d.S("s", 64)
		d.Bool("b")
		if err := d.End(); err != nil && !errors.Is(err, errTest) {
			t.Fatalf("error does not wrap the sentinel: %v", err)
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

func TestTimeTruncated(t *testing.T) {
	d := Dec{B: []byte{1}, Sentinel: errTest}
	if got := d.Time("last update"); !got.IsZero() || !errors.Is(d.Err, errTest) || !strings.Contains(d.Err.Error(), "last update: truncated") {
		t.Fatalf("got %v, %v", got, d.Err)
	}
}
