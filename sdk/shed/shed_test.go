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

// TestCohortRotationReshufflesUsers: a new epoch must deal the users out
// afresh, independently of the cohorts they had. Appending the epoch to the
// key's FNV-1a left the low bits of the hash (the cohort) a function of the
// low bits of the bytes, so users moved between epochs in fixed groups (a
// chi-square of 7,000 to 116,000 here, about 225 when independent).
func TestCohortRotationReshufflesUsers(t *testing.T) {
	const users = 16000
	for _, epoch := range []int64{0, 1, 7, 255, 490000, 490001, 1 << 40} {
		var joint [Cohorts][Cohorts]int
		var before, after [Cohorts]int
		for u := range users {
			user := fmt.Sprint("user-", u)
			a, b := Cohort(user, epoch), Cohort(user, epoch+1)
			joint[a][b]++
			before[a]++
			after[b]++
		}
		// Chi-square test of independence: (16-1)^2 = 225 degrees of
		// freedom, 99.9% quantile about 300.
		chi2 := 0.0
		for a := range joint {
			for b, n := range joint[a] {
				want := float64(before[a]) * float64(after[b]) / users
				chi2 += (float64(n) - want) * (float64(n) - want) / want
			}
		}
		if chi2 > 300 {
			t.Errorf("epochs %d and %d: chi-square %.0f of the (before, after) cohort pairs, want under 300 (independent: about 225)", epoch, epoch+1, chi2)
		}
	}
}

// TestCohortRotationSharesTheLowestCohortsFairly: over a day of hourly
// epochs every user should spend about a quarter of the hours in the lowest
// quarter of the cohorts (the first shed); with the groups of the old hash
// 5.6% of the users were there half the day or more, against 0.75% for
// independent epochs.
func TestCohortRotationSharesTheLowestCohortsFairly(t *testing.T) {
	const users, hours, day0 = 16000, 24, 490000 // hours since 1970
	often := 0
	for u := range users {
		user := fmt.Sprint("user-", u)
		n := 0
		for e := int64(day0); e < day0+hours; e++ {
			if Cohort(user, e) < Cohorts/4 {
				n++
			}
		}
		if n >= hours/2 {
			often++
		}
	}
	if often > users/50 {
		t.Fatalf("%d of %d users are in the lowest quarter of the cohorts for %d of %d epochs or more, want under 2%% (independent epochs: 0.75%%)", often, users, hours/2, hours)
	}
}

// TestAliasOfAClassNameAppliesInEveryLetterCase: class names match in any
// letter case, so an alias that redefines one (demoting "critical" so that
// clients cannot claim it) must too; before, "Critical" still got the
// critical class. Two spellings aliased to different classes give the other
// spellings the lower one, whatever the map's order.
func TestAliasOfAClassNameAppliesInEveryLetterCase(t *testing.T) {
	c := NewClassifier(&rules.Priority{
		Levels:  map[string]rules.Class{"0": rules.ClassCore, "1": rules.ClassCore},
		Aliases: map[string]rules.Class{"critical": rules.ClassCore, "internal-checkout": rules.ClassCritical},
	})
	for _, v := range []string{"0", "1", "critical", "Critical", "CRITICAL", " critical\t"} {
		if got := c.Classify(v); got != 1 {
			t.Errorf("Classify(%q) = %d, want core (1): the alias demotes critical", v, got)
		}
	}
	if got := c.Classify("internal-checkout"); got != 0 {
		t.Errorf("Classify(internal-checkout) = %d, want critical (0)", got)
	}
	if got := c.Classify("Browse"); got != 2 {
		t.Errorf("Classify(Browse) = %d, want browse (2): other names keep their class", got)
	}
	for range 20 { // map order varies from one NewClassifier to the next
		c := NewClassifier(&rules.Priority{Aliases: map[string]rules.Class{
			"core": rules.ClassCritical, "Core": rules.ClassBatch, "CORE": rules.ClassBrowse,
		}})
		for v, want := range map[string]int{"core": 0, "Core": 3, "CORE": 2, "cOrE": 3, " core ": 3} {
			if got := c.Classify(v); got != want {
				t.Fatalf("Classify(%q) = %d, want %d", v, got, want)
			}
		}
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

func BenchmarkCohort(b *testing.B) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = Cohort("user-1234567", 490000)
		}
	})
}

func TestClassifyFromCapsByPeer(t *testing.T) {
	c := NewClassifier(&rules.Priority{Trust: &rules.Trust{
		Max:   rules.ClassBrowse,
		Peers: map[string]rules.Class{"gw": rules.ClassCritical, "etl": rules.ClassBatch},
	}})
	if !c.Trusts() || NewClassifier(nil).Trusts() {
		t.Fatal("Trusts must follow the rules")
	}
	cases := []struct {
		v, peer string
		want    int
		capped  bool
	}{
		{"0", "", 2, true},
		{"critical", "gw", 0, false},
		{"core", "x", 2, true},
		{"batch", "", 3, false},
		{"", "", 2, true}, // the default core is claimed too
		{"critical", "etl", 3, true},
		{"", "gw", 1, false},
	}
	for _, tt := range cases {
		got, capped := c.ClassifyFrom(tt.v, tt.peer)
		if got != tt.want || capped != tt.capped {
			t.Errorf("ClassifyFrom(%q, %q) = %d, %v; want %d, %v", tt.v, tt.peer, got, capped, tt.want, tt.capped)
		}
	}
	if got, capped := NewClassifier(nil).ClassifyFrom("0", ""); got != 0 || capped {
		t.Errorf("without trust: %d, %v", got, capped)
	}
}
