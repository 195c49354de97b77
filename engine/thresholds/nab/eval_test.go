package nab_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"governor.dev/governor/engine/thresholds"
	"governor.dev/governor/engine/thresholds/nab"
	"governor.dev/governor/internal/testenv"
)

// datasetDir is <repo root>/../shared/datasets/nab; tests run in the
// package directory, engine/thresholds/nab.
func datasetDir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "..", "shared", "datasets", "nab"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "combined_windows.json")); err != nil {
		testenv.Unavailable(t, "NAB dataset at %s: %v", dir, err)
	}
	return dir
}

// newDetector validates opt once and returns a factory of fresh detectors.
func newDetector(t testing.TB, opt thresholds.Options) func() nab.Detector {
	t.Helper()
	if _, err := thresholds.New(opt); err != nil {
		t.Fatal(err)
	}
	return func() nab.Detector {
		d, _ := thresholds.New(opt) // validated above
		return d
	}
}

// standardFloor is the regression floor for the standard-profile score of
// thresholds.DefaultOptions on the NAB subset, just below the measured score.
const standardFloor = 72.3

// TestNABEvaluation runs the detector over the NAB subset exactly as
// `engine detect` does (files in, files out), reads the output back and scores
// it with NAB's rules for all three profiles.
func TestNABEvaluation(t *testing.T) {
	dir := datasetDir(t)
	ws, err := nab.ReadWindowsFile(filepath.Join(dir, "combined_windows.json"))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	rows, err := nab.Run(context.Background(), filepath.Join(dir, "data"), out, newDetector(t, thresholds.DefaultOptions()))
	if err != nil {
		t.Fatal(err)
	}
	series, err := nab.ReadResults(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(series) != len(ws) {
		t.Fatalf("scored %d files, labels cover %d", len(series), len(ws))
	}
	t.Logf("%d files, %d rows, %d windows", len(series), rows, countWindows(ws))
	var standard nab.Result
	for _, p := range []nab.Profile{nab.Standard, nab.RewardLowFP, nab.RewardLowFN} {
		res, err := nab.Score(series, ws, p)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%-20s score %6.2f (raw %6.2f, null %v, perfect %v, threshold %.4f, windows detected %d/%d, false positives %d)",
			p.Name, res.Score, res.Raw, res.Null, res.Perfect, res.Threshold, res.Detected, res.Windows, res.FP)
		if p == nab.Standard {
			standard = res
			for _, f := range res.Files {
				t.Logf("  %-58s raw %6.2f  windows %d detected %d  false positives %d", f.Name, f.Raw, f.Windows, f.Detected, f.FP)
			}
		}
	}
	if standard.Score < standardFloor {
		t.Errorf("standard profile score %.2f, below the regression floor %.1f", standard.Score, standardFloor)
	}
}

func countWindows(ws nab.Windows) int {
	n := 0
	for _, w := range ws {
		n += len(w)
	}
	return n
}
