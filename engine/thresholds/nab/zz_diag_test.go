package nab_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"governor.dev/governor/engine/thresholds/nab"
)

// diagnose logs, per file, the best score inside each window (and how far
// into the window it came) and the top scores outside windows.
func diagnose(t *testing.T, series []nab.Series, ws nab.Windows) {
	for _, s := range series {
		n := len(s.Times)
		prob := nab.ProbationRows(n)
		var b strings.Builder
		inWin := make([]bool, n)
		for _, w := range ws[s.Name] {
			best, at, l, r := -1.0, 0, -1, -1
			for i := range n {
				if s.Times[i].Before(w.Start) || s.Times[i].After(w.End) {
					continue
				}
				inWin[i] = true
				if l < 0 {
					l = i
				}
				r = i
				if s.Scores[i] > best {
					best, at = s.Scores[i], i
				}
			}
			fmt.Fprintf(&b, " W[%.3g @%.2f]", best, float64(at-l)/float64(r-l+1))
		}
		var out []float64
		for i := prob; i < n; i++ {
			if !inWin[i] && s.Scores[i] > 0 {
				out = append(out, s.Scores[i])
			}
		}
		sort.Sort(sort.Reverse(sort.Float64Slice(out)))
		if len(out) > 4 {
			out = out[:4]
		}
		fmt.Fprintf(&b, " out%.3g", out)
		t.Logf("%-45s%s", strings.TrimPrefix(strings.TrimPrefix(s.Name, "realAWSCloudwatch/"), "artificial"), b.String())
	}
}
