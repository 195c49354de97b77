package thresholds

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"governor.dev/governor/engine/thresholds/nab"
	"governor.dev/governor/internal/testenv"
)

// robustFloor is the lowest standard-profile NAB score DefaultOptions may
// reach under any single perturbation of TestNABRobustness, just below the
// measured minimum.
const robustFloor = 69.5

// perturbation is one change to DefaultOptions or to the rarity bin edges.
type perturbation struct {
	name  string
	opt   func(*Options)
	shift float64 // rarity bin edges moved by this share of a bin
}

// perturbations are the bin alignments and one-at-a-time changes of the
// continuous options by x0.8 and x1.25 (MinValue by feature family,
// EchoWindow by -2 and +3).
func perturbations() []perturbation {
	ps := []perturbation{{name: "defaults"}}
	for _, sh := range []float64{-0.2, -0.1, 0.1, 0.2, 0.3, 0.4} {
		ps = append(ps, perturbation{name: fmt.Sprintf("bins%+.1f", sh), shift: sh})
	}
	fields := []struct {
		name string
		f    func(*Options) *float64
	}{
		{"BaselineHalfLife", func(o *Options) *float64 { return &o.BaselineHalfLife }},
		{"Clip", func(o *Options) *float64 { return &o.Clip }},
		{"SeasonHalfLife", func(o *Options) *float64 { return &o.SeasonHalfLife }},
		{"SeasonGain", func(o *Options) *float64 { return &o.SeasonGain }},
		{"ShortHalfLife", func(o *Options) *float64 { return &o.ShortHalfLife }},
		{"MidHalfLife", func(o *Options) *float64 { return &o.MidHalfLife }},
		{"LongHalfLife", func(o *Options) *float64 { return &o.LongHalfLife }},
		{"EnvelopeHalfLife", func(o *Options) *float64 { return &o.EnvelopeHalfLife }},
		{"RangeFloor", func(o *Options) *float64 { return &o.RangeFloor }},
		{"MemoryHalfLife", func(o *Options) *float64 { return &o.MemoryHalfLife }},
		{"VolatilityHalfLife", func(o *Options) *float64 { return &o.VolatilityHalfLife }},
		{"CorroborationLevel", func(o *Options) *float64 { return &o.CorroborationLevel }},
		{"LoneDamping", func(o *Options) *float64 { return &o.LoneDamping }},
	}
	for _, fl := range fields {
		for _, k := range []float64{0.8, 1.25} {
			ps = append(ps, perturbation{name: fmt.Sprintf("%sx%v", fl.name, k), opt: func(o *Options) {
				p := fl.f(o)
				*p = min(*p*k, 1e9)
				o.SeasonGain = min(o.SeasonGain, 1)
			}})
		}
	}
	minValues := []struct {
		name string
		fs   []Feature
	}{
		{"MinValue[point]", []Feature{PointUp, PointDown}},
		{"MinValue[envelope]", []Feature{EnvelopeUp, EnvelopeDown}},
		{"MinValue[shift]", []Feature{ShiftUp, ShiftDown}},
		{"MinValue[volatility]", []Feature{VolatilityUp}},
	}
	for _, mv := range minValues {
		for _, k := range []float64{0.8, 1.25} {
			ps = append(ps, perturbation{name: fmt.Sprintf("%sx%v", mv.name, k), opt: func(o *Options) {
				for _, f := range mv.fs {
					o.MinValue[f] *= k
				}
			}})
		}
	}
	for _, dw := range []int{-2, 3} {
		ps = append(ps, perturbation{name: fmt.Sprintf("EchoWindow%+d", dw), opt: func(o *Options) { o.EchoWindow += dw }})
	}
	return ps
}

// TestNABRobustness scores DefaultOptions on the NAB subset under small
// perturbations (bin alignment, each option a little up and down) and
// checks that no single one costs the score more than a few points: the
// score must not hinge on one lucky setting.
func TestNABRobustness(t *testing.T) {
	if testing.Short() {
		t.Skip("scores the NAB subset 30 times")
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "shared", "datasets", "nab"))
	if err != nil {
		t.Fatal(err)
	}
	ws, err := nab.ReadWindowsFile(filepath.Join(dir, "combined_windows.json"))
	if err != nil {
		if _, serr := os.Stat(dir); serr != nil {
			testenv.Unavailable(t, "NAB dataset at %s: %v", dir, serr)
		}
		t.Fatal(err)
	}
	var scores []float64
	for _, p := range perturbations() {
		opt := DefaultOptions()
		if p.opt != nil {
			p.opt(&opt)
		}
		if _, err := New(opt); err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		series, err := nab.Detect(filepath.Join(dir, "data"), func() nab.Detector {
			d, _ := New(opt) // validated above
			for i := range d.rare {
				d.rare[i].lo = rarityMin + p.shift*rarityStep
			}
			return d
		})
		if err != nil {
			t.Fatal(err)
		}
		res, err := nab.Score(series, ws, nab.Standard)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%-24s standard %6.2f (windows %d/%d, false positives %d)", p.name, res.Score, res.Detected, res.Windows, res.FP)
		if res.Score < robustFloor {
			t.Errorf("%s: standard score %.2f, below the robustness floor %.1f", p.name, res.Score, robustFloor)
		}
		scores = append(scores, res.Score)
	}
	mean := 0.0
	for _, s := range scores {
		mean += s / float64(len(scores))
	}
	t.Logf("%d perturbations: min %.2f, mean %.2f, max %.2f", len(scores), slices.Min(scores), mean, slices.Max(scores))
}
