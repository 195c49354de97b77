package shed

import (
	"fmt"
	"testing"

	"governor.dev/governor/sdk/rules"
)

func TestClassify(t *testing.T) {
	custom := NewClassifier(&rules.Priority{
		Levels:  map[string]rules.Class{"3": rules.ClassBatch},
		Aliases: map[string]rules.Class{"checkout": rules.ClassCritical},
		Default: rules.ClassBrowse,
	})
	def := NewClassifier(nil)
	tests := []struct {
		c    *Classifier
		v    string
		want int
	}{
		{def, "0", 0}, {def, "1", 0}, {def, "2", 1}, {def, "4", 1}, {def, "5", 2}, {def, "7", 2}, {def, "8", 3}, {def, "9", 3},
		{def, " 8 ", 3}, {def, "\t0", 0},
		{def, "critical", 0}, {def, "CORE", 1}, {def, " Browse ", 2}, {def, "batch", 3},
		{def, "", 1}, {def, "10", 1}, {def, "-1", 1}, {def, "vip", 1}, {def, "checkout", 1},
		{custom, "3", 3}, {custom, "2", 1}, {custom, "checkout", 0}, {custom, "Checkout", 2}, {custom, "", 2},
	}
	for _, tt := range tests {
		if got := tt.c.Classify(tt.v); got != tt.want {
			t.Errorf("Classify(%q) = %d, want %d", tt.v, got, tt.want)
		}
	}
}

func TestThresholdsAreMonotoneAndReserveHeadroom(t *testing.T) {
	for limit := 1; limit <= 2000; limit++ {
		for _, reserved := range []float64{0, 0.05, 0.1, 0.3, 0.9} {
			c := Thresholds(limit, reserved)
			if c[0] != limit {
				t.Fatalf("limit %d: critical ceiling %d", limit, c[0])
			}
			for k := 1; k < NumClasses; k++ {
				if c[k] > c[k-1] || c[k] < 1 {
					t.Fatalf("limit %d reserved %v: ceilings %v not monotone or below 1", limit, reserved, c)
				}
			}
			if reserved > 0 && limit > 1 && c[1] >= limit {
				t.Fatalf("limit %d reserved %v: core may fill the whole limit (%v)", limit, reserved, c)
			}
			if want := int(float64(limit) * (1 - reserved)); reserved > 0 && c[1] > max(want, 1) {
				t.Fatalf("limit %d reserved %v: core ceiling %d above %d", limit, reserved, c[1], want)
			}
		}
	}
	if got, want := Thresholds(100, 0.1), (Ceilings{100, 90, 81, 72}); got != want {
		t.Fatalf("Thresholds(100, 0.1) = %v, want %v", got, want)
	}
	if got := Thresholds(0, 0.1); got != (Ceilings{}) {
		t.Fatalf("Thresholds(0) = %v, want zeros", got)
	}
}

func TestForCohortStaysInsideTheClassBand(t *testing.T) {
	for _, limit := range []int{4, 10, 20, 100, 1000} {
		c := Thresholds(limit, 0.1)
		for class := 0; class < NumClasses; class++ {
			prev := -1
			for k := uint32(0); k < Cohorts; k++ {
				v := c.ForCohort(class, k)
				if v > c[class] || (class < NumClasses-1 && v < c[class+1]) || v < prev {
					t.Fatalf("limit %d class %d cohort %d: %d outside [%v] or decreasing", limit, class, k, v, c)
				}
				prev = v
			}
			if c.ForCohort(class, Cohorts-1) != c[class] {
				t.Fatalf("limit %d class %d: the top cohort does not get the class ceiling", limit, class)
			}
		}
		if c.ForCohort(0, 0) != limit {
			t.Fatalf("critical is spread over cohorts")
		}
	}
}

func TestShareAddsUp(t *testing.T) {
	for total := 0; total < 300; total++ {
		for _, n := range []int{1, 2, 4, 8, 64} {
			sum := 0
			for i := range n {
				sum += Share(total, n, i)
			}
			if sum != total {
				t.Fatalf("Share(%d, %d) adds up to %d", total, n, sum)
			}
		}
	}
}

func TestCohortIsStableAndSpread(t *testing.T) {
	var hist [Cohorts]int
	for u := range 16000 {
		user := fmt.Sprint("user-", u)
		k := Cohort(user, 7)
		if k != Cohort(user, 7) || k >= Cohorts {
			t.Fatalf("Cohort(%q) unstable or out of range: %d", user, k)
		}
		hist[k]++
	}
	for k, n := range hist {
		if n < 800 || n > 1200 {
			t.Fatalf("cohort %d holds %d of 16000 users; want about 1000", k, n)
		}
	}
	if Cohort("", 1) != Cohorts-1 {
		t.Fatal("an anonymous user is not in the top cohort")
	}
}

// FuzzClassify: any header value yields a valid class; digits (with blanks)
// parse to themselves and map through the levels.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{"", "0", "9", " 5 ", "critical", "BATCH", "checkout", "10", "\x00", "é"} {
		f.Add(s)
	}
	c := NewClassifier(&rules.Priority{Aliases: map[string]rules.Class{"checkout": rules.ClassCritical}})
	f.Fuzz(func(t *testing.T, v string) {
		r := c.Classify(v)
		if r < 0 || r >= NumClasses {
			t.Fatalf("Classify(%q) = %d", v, r)
		}
		d, ok := ParseLevel(v)
		if ok {
			if d < 0 || d > 9 {
				t.Fatalf("ParseLevel(%q) = %d", v, d)
			}
			if r != int(defaultLevels[d]) {
				t.Fatalf("Classify(%q) = %d, want level %d's class %d", v, r, d, defaultLevels[d])
			}
			if fmt.Sprint(d) != trimBlanks(v) {
				t.Fatalf("ParseLevel(%q) = %d", v, d)
			}
		}
	})
}

func trimBlanks(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

func BenchmarkClassify(b *testing.B) {
	c := NewClassifier(nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = c.Classify("browse")
		}
	})
}
