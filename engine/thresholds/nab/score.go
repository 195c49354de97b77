package nab

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
)

// Profile is a NAB cost profile: the reward for a detected window (TP), the
// cost of a missed window (FN) and the full cost of a false positive (FP).
type Profile struct {
	Name       string
	TP, FN, FP float64
}

// The three NAB profiles (profiles.json).
var (
	Standard    = Profile{Name: "standard", TP: 1, FN: 1, FP: 0.11}
	RewardLowFP = Profile{Name: "reward_low_FP_rate", TP: 1, FN: 1, FP: 0.22}
	RewardLowFN = Profile{Name: "reward_low_FN_rate", TP: 1, FN: 2, FP: 0.11}
)

// ProbationPercent is the leading share of each file that is not scored.
const ProbationPercent = 0.15

// Series is one detector output file: a timestamp and an anomaly score per row.
type Series struct {
	Name   string // corpus name, `<category>/<file>.csv`
	Times  []time.Time
	Scores []float64
}

// FileScore is one file's share of a Result at the chosen threshold.
type FileScore struct {
	Name     string
	Raw      float64 // sum of window rewards, missed-window costs and FP costs
	Windows  int
	Detected int
	FP       int // rows at or above the threshold outside every window
}

// Result is a corpus score for one profile.
type Result struct {
	Profile   string
	Score     float64 // normalised: null detector 0, perfect detector 100
	Raw       float64 // best raw score over all thresholds
	Null      float64 // raw score of a detector that never fires
	Perfect   float64 // raw score of a detector firing at each window start
	Threshold float64 // the threshold that gives Raw
	Windows   int
	Detected  int
	FP        int
	Files     []FileScore
}

// point is one scored row after the probationary period.
type point struct {
	score  float64 // detector output
	weight float64 // reward (in a window) or cost (outside) if detected here
	window int     // global window index, or -1 outside every window
	file   int
}

// ProbationRows is NAB's probationary period for a file of n rows.
func ProbationRows(n int) int {
	return int(math.Min(math.Floor(ProbationPercent*float64(n)), ProbationPercent*5000))
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// scaledSigmoid maps a relative position to a reward in (-1, 1): -1 (window
// start) gives about +0.987, 0 (window end) 0, and beyond 3 the full -1.
func scaledSigmoid(pos float64) float64 {
	if pos > 3 {
		return -1
	}
	return 2*sigmoid(-5*pos) - 1
}

// Score scores detector output against labelled windows with NAB's rules,
// sweeping one threshold over the whole corpus. Every series must have
// windows (possibly none) in ws.
func Score(series []Series, ws Windows, p Profile) (Result, error) {
	if p.TP <= 0 || p.FN < 0 || p.FP < 0 {
		return Result{}, fmt.Errorf("%w: profile %q: weights must be TP > 0, FN >= 0, FP >= 0", ErrInput, p.Name)
	}
	var pts []point
	res := Result{Profile: p.Name, Files: make([]FileScore, len(series))}
	var windowFile []int
	for fi, s := range series {
		wins, ok := ws[s.Name]
		if !ok {
			return Result{}, fmt.Errorf("%w: %s: no window labels", ErrInput, s.Name)
		}
		if len(s.Times) != len(s.Scores) {
			return Result{}, fmt.Errorf("%w: %s: %d timestamps but %d scores", ErrInput, s.Name, len(s.Times), len(s.Scores))
		}
		filePts, err := filePoints(s, wins, p, len(windowFile), fi)
		if err != nil {
			return Result{}, err
		}
		pts = append(pts, filePts...)
		for range wins {
			windowFile = append(windowFile, fi)
		}
		res.Files[fi] = FileScore{Name: s.Name, Windows: len(wins)}
	}
	nw := len(windowFile)
	res.Windows = nw
	res.Null = -p.FN * float64(nw)
	res.Perfect = p.TP * float64(nw)
	res.Threshold, res.Raw = sweep(pts, nw, p)
	if res.Perfect != res.Null {
		res.Score = 100 * (res.Raw - res.Null) / (res.Perfect - res.Null)
	}
	tally(&res, pts, windowFile, p)
	return res, nil
}

// filePoints weighs every scored row of one file.
func filePoints(s Series, wins []Window, p Profile, firstWindow, fi int) ([]point, error) {
	n := len(s.Times)
	type span struct{ left, right int }
	spans := make([]span, len(wins))
	for k, w := range wins {
		l := sort.Search(n, func(i int) bool { return !s.Times[i].Before(w.Start) })
		r := sort.Search(n, func(i int) bool { return s.Times[i].After(w.End) }) - 1
		if l > r || l >= n {
			return nil, fmt.Errorf("%w: %s: window %d (%s .. %s) holds no rows", ErrInput, s.Name, k,
				w.Start.Format(TimeLayout), w.End.Format(TimeLayout))
		}
		spans[k] = span{l, r}
	}
	for i := 1; i < n; i++ {
		if s.Times[i].Before(s.Times[i-1]) {
			return nil, fmt.Errorf("%w: %s: row %d: timestamp goes backwards", ErrInput, s.Name, i)
		}
	}
	maxTP := scaledSigmoid(-1)
	probation := ProbationRows(n)
	out := make([]point, 0, n-probation)
	k := 0                        // next or current window
	prevRight, prevWidth := -1, 0 // last window passed
	for i := 0; i < n; i++ {
		var pt point
		pt.file = fi
		pt.score = s.Scores[i]
		if k < len(spans) && i >= spans[k].left {
			width := spans[k].right - spans[k].left + 1
			pos := -float64(spans[k].right-i+1) / float64(width)
			pt.weight = scaledSigmoid(pos) * p.TP / maxTP
			pt.window = firstWindow + k
		} else {
			pt.window = -1
			if prevRight < 0 {
				pt.weight = -p.FP
			} else {
				pos := math.Abs(float64(prevRight-i)) / math.Max(float64(prevWidth-1), 1)
				pt.weight = scaledSigmoid(pos) * p.FP
			}
		}
		if i >= probation {
			if math.IsNaN(pt.score) {
				return nil, fmt.Errorf("%w: %s: row %d: score is NaN", ErrInput, s.Name, i)
			}
			out = append(out, pt)
		}
		if k < len(spans) && i == spans[k].right {
			prevRight, prevWidth = i, spans[k].right-spans[k].left+1
			k++
		}
	}
	return out, nil
}

// sweep returns the threshold with the best raw score. Rows with a score at or
// above the threshold are detections; only the best (earliest) detection in a
// window counts.
func sweep(pts []point, nw int, p Profile) (threshold, raw float64) {
	order := slices.Clone(pts)
	slices.SortFunc(order, func(a, b point) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return 0
	})
	best := make([]float64, nw)
	hit := make([]bool, nw)
	total := -p.FN * float64(nw)
	threshold, raw = math.Inf(1), total
	for i := 0; i < len(order); {
		j := i
		for ; j < len(order) && order[j].score == order[i].score; j++ {
			pt := order[j]
			switch {
			case pt.window < 0:
				total += pt.weight
			case !hit[pt.window]:
				hit[pt.window], best[pt.window] = true, pt.weight
				total += p.FN + pt.weight
			case pt.weight > best[pt.window]:
				total += pt.weight - best[pt.window]
				best[pt.window] = pt.weight
			}
		}
		if total > raw {
			threshold, raw = order[i].score, total
		}
		i = j
	}
	return threshold, raw
}

// tally fills the counts and per-file scores at res.Threshold.
func tally(res *Result, pts []point, windowFile []int, p Profile) {
	best := make([]float64, len(windowFile))
	hit := make([]bool, len(windowFile))
	for _, pt := range pts {
		if pt.score < res.Threshold {
			continue
		}
		if pt.window < 0 {
			res.FP++
			res.Files[pt.file].FP++
			res.Files[pt.file].Raw += pt.weight
			continue
		}
		if !hit[pt.window] || pt.weight > best[pt.window] {
			hit[pt.window], best[pt.window] = true, pt.weight
		}
	}
	for w, f := range windowFile {
		if hit[w] {
			res.Detected++
			res.Files[f].Detected++
			res.Files[f].Raw += best[w]
		} else {
			res.Files[f].Raw -= p.FN
		}
	}
}
