package attempt

import (
	"strconv"
	"strings"
	"testing"
)

func TestParseAcceptsOneToSixDigitsFromOne(t *testing.T) {
	tests := []struct {
		in   string
		want int
		ok   bool
	}{
		{"1", 1, true},
		{"2", 2, true},
		{"007", 7, true},
		{"999999", 999999, true},
		{"0", 0, false},
		{"000000", 0, false},
		{"", 0, false},
		{"1234567", 0, false},
		{"0000001", 0, false},
		{"+2", 0, false},
		{"-1", 0, false},
		{" 2", 0, false},
		{"2 ", 0, false},
		{"1e3", 0, false},
		{"٣", 0, false},
		{"two", 0, false},
	}
	for _, tt := range tests {
		n, ok := Parse(tt.in)
		if n != tt.want || ok != tt.ok {
			t.Errorf("Parse(%q) = %d, %v; want %d, %v", tt.in, n, ok, tt.want, tt.ok)
		}
	}
}

func TestParseAndFormatAllocateNothing(t *testing.T) {
	var sink int
	if a := testing.AllocsPerRun(100, func() {
		for _, v := range []string{"3", "x", "1234567", "0"} {
			n, _ := Parse(v)
			sink += n
		}
		for n := range 100 {
			sink += len(Format(n))
		}
	}); a != 0 {
		t.Fatalf("%v allocations per run, want 0", a)
	}
	_ = sink
}

// FuzzParse: Parse never panics, accepts exactly what strconv reads as 1 to
// 999999 written in 1 to 6 ASCII digits, and Format writes back what it
// accepts.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"1", "2", "007", "0", "", "-1", "+2", " 2", "999999", "1000000", "0000001", "1e3", "٣", "\x00", "9999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		n, ok := Parse(v)
		digits := len(v) >= 1 && len(v) <= MaxDigits && strings.Trim(v, "0123456789") == ""
		ref, err := strconv.Atoi(v)
		want := digits && err == nil && ref >= 1
		if ok != want {
			t.Fatalf("Parse(%q) ok = %v, want %v", v, ok, want)
		}
		if !ok {
			if n != 0 {
				t.Fatalf("Parse(%q) = %d with ok false", v, n)
			}
			return
		}
		if n != ref {
			t.Fatalf("Parse(%q) = %d, want %d", v, n, ref)
		}
		if got := Format(n); got != strings.TrimLeft(v, "0") {
			t.Fatalf("Format(Parse(%q)) = %q", v, got)
		}
		if m, ok := Parse(Format(n)); !ok || m != n {
			t.Fatalf("Parse(Format(%d)) = %d, %v", n, m, ok)
		}
	})
}

func TestInboundTakesTheLargerValidFirstValue(t *testing.T) {
	tests := []struct {
		name         string
		ours, envoys []string
		want         int
	}{
		{"none", nil, nil, 1},
		{"empty values", []string{}, []string{}, 1},
		{"ours", []string{"3"}, nil, 3},
		{"Envoy's", nil, []string{"2"}, 2},
		{"the larger of both", []string{"2"}, []string{"5"}, 5},
		{"ours larger", []string{"4"}, []string{"2"}, 4},
		{"a malformed one is skipped", []string{"two"}, []string{"2"}, 2},
		{"both malformed", []string{"0"}, []string{"+2"}, 1},
		{"the first value counts", []string{"x", "3"}, []string{"1", "9"}, 1},
	}
	for _, tt := range tests {
		if got := Inbound(tt.ours, tt.envoys); got != tt.want {
			t.Errorf("%s: Inbound(%q, %q) = %d, want %d", tt.name, tt.ours, tt.envoys, got, tt.want)
		}
	}
}
