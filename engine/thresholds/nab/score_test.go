package nab

import (
	"errors"
	"math"
	"testing"
	"time"
)

// corpus builds n rows every 5 minutes from t0 and a window over rows [l, r].
func rowsAndWindow(n, l, r int) ([]time.Time, Window) {
	t0 := time.Date(2014, 4, 1, 0, 0, 0, 0, time.UTC)
	ts := make([]time.Time, n)
	for i := range ts {
		ts[i] = t0.Add(time.Duration(i) * 5 * time.Minute)
	}
	return ts, Window{Start: ts[l], End: ts[r]}
}

func scoresWith(n int, at ...int) []float64 {
	s := make([]float64, n)
	for _, i := range at {
		s[i] = 1
	}
	return s
}

func TestScoreAnchors(t *testing.T) {
	ts, w := rowsAndWindow(1000, 400, 499)
	ts2, w2 := rowsAndWindow(2000, 1200, 1399)
	ws := Windows{"a/one.csv": {w}, "a/two.csv": {w2}, "b/none.csv": nil}
	run := func(s1, s2, s3 []float64) Result {
		t.Helper()
		res, err := Score([]Series{
			{Name: "a/one.csv", Times: ts, Scores: s1},
			{Name: "a/two.csv", Times: ts2, Scores: s2},
			{Name: "b/none.csv", Times: ts, Scores: s3},
		}, ws, Standard)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	tests := []struct {
		name    string
		s1, s2  []float64
		s3      []float64
		want    float64
		tol     float64
		wantRaw float64
	}{
		{"null detector", scoresWith(1000), scoresWith(2000), scoresWith(1000), 0, 1e-9, -2},
		{"perfect detector", scoresWith(1000, 400), scoresWith(2000, 1200), scoresWith(1000), 100, 1e-9, 2},
		// Detecting only the first window at its start: raw = 1 - 1 = 0, so 50.
		{"half", scoresWith(1000, 400), scoresWith(2000), scoresWith(1000), 50, 1e-9, 0},
		// Detection at the last row of a window: pos = -1/100, reward
		// (2*sigmoid(0.05)-1)/maxTP = 0.0253...
		{"late", scoresWith(1000, 499), scoresWith(2000, 1200), scoresWith(1000), 100 * (3 + (2*sigmoid(0.05)-1)/scaledSigmoid(-1)) / 4, 1e-9, math.NaN()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := run(tt.s1, tt.s2, tt.s3)
			if math.Abs(res.Score-tt.want) > tt.tol {
				t.Errorf("score %v, want %v (raw %v, threshold %v)", res.Score, tt.want, res.Raw, res.Threshold)
			}
			if !math.IsNaN(tt.wantRaw) && math.Abs(res.Raw-tt.wantRaw) > 1e-9 {
				t.Errorf("raw %v, want %v", res.Raw, tt.wantRaw)
			}
			if res.Null != -2 || res.Perfect != 2 || res.Windows != 2 {
				t.Errorf("null %v perfect %v windows %d, want -2, 2, 2", res.Null, res.Perfect, res.Windows)
			}
		})
	}
}

// TestFalsePositiveWeighting checks NAB's FP costs: full -fpWeight before any
// window or far after one, less right after a window.
func TestFalsePositiveWeighting(t *testing.T) {
	ts, w := rowsAndWindow(1000, 400, 499)
	ws := Windows{"a/f.csv": {w}}
	tests := []struct {
		name string
		at   int
		want float64 // raw score: -1 (missed window) + FP cost, or the TP reward
	}{
		{"before the window", 300, -1 - 0.11},
		{"right after the window", 500, -1 + 0.11*scaledSigmoid(1.0/99)},
		{"half a window after", 549, -1 + 0.11*scaledSigmoid(50.0/99)},
		{"far after the window", 900, -1 - 0.11},
		{"in the probation period", 100, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Score([]Series{{Name: "a/f.csv", Times: ts, Scores: scoresWith(1000, tt.at)}}, ws, Standard)
			if err != nil {
				t.Fatal(err)
			}
			// The sweep may prefer detecting nothing (raw -1); compare the
			// tally at threshold 1 by rescoring with only that row.
			got := res.Raw
			if tt.want < -1 {
				// A pure FP is never worth it: the best threshold detects nothing.
				if got != -1 || res.FP != 0 {
					t.Fatalf("raw %v FP %d, want -1 and no detections", got, res.FP)
				}
				pts, err := filePoints(Series{Name: "a/f.csv", Times: ts, Scores: scoresWith(1000, tt.at)}, ws["a/f.csv"], Standard, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range pts {
					if p.score == 1 && math.Abs(-1+p.weight-tt.want) > 1e-9 {
						t.Fatalf("FP weight %v, want %v", p.weight, tt.want+1)
					}
				}
				return
			}
			if math.Abs(got-math.Max(tt.want, -1)) > 1e-9 {
				t.Fatalf("raw %v, want %v", got, tt.want)
			}
		})
	}
}

func TestProbationRows(t *testing.T) {
	for _, tt := range []struct{ n, want int }{{1000, 150}, {4032, 604}, {6000, 750}, {1243, 186}} {
		if got := ProbationRows(tt.n); got != tt.want {
			t.Errorf("ProbationRows(%d) = %d, want %d", tt.n, got, tt.want)
		}
	}
}

func TestScoreRefusesBadInput(t *testing.T) {
	ts, w := rowsAndWindow(100, 40, 49)
	back := append([]time.Time(nil), ts...)
	back[50], back[51] = back[51], back[50]
	tests := []struct {
		name string
		s    Series
		ws   Windows
	}{
		{"no labels", Series{Name: "x.csv", Times: ts, Scores: make([]float64, 100)}, Windows{}},
		{"length mismatch", Series{Name: "x.csv", Times: ts, Scores: make([]float64, 99)}, Windows{"x.csv": {w}}},
		{"time backwards", Series{Name: "x.csv", Times: back, Scores: make([]float64, 100)}, Windows{"x.csv": {w}}},
		{"empty window", Series{Name: "x.csv", Times: ts, Scores: make([]float64, 100)}, Windows{"x.csv": {{Start: ts[99].Add(time.Hour), End: ts[99].Add(2 * time.Hour)}}}},
		{"NaN score", Series{Name: "x.csv", Times: ts, Scores: append(make([]float64, 99), math.NaN())}, Windows{"x.csv": {w}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Score([]Series{tt.s}, tt.ws, Standard); !errors.Is(err, ErrInput) {
				t.Fatalf("err %v, want ErrInput", err)
			}
		})
	}
}
