package nab_test

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"governor.dev/governor/engine/thresholds"
	"governor.dev/governor/engine/thresholds/nab"
	"governor.dev/governor/internal/testenv"
)

// datasetDir is <repo root>/../shared/datasets/nab.
func datasetDir(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..", "..")
	dir := filepath.Join(root, "..", "shared", "datasets", "nab")
	if _, err := os.Stat(filepath.Join(dir, "combined_windows.json")); err != nil {
		testenv.Unavailable(t, "NAB dataset at %s: %v", dir, err)
	}
	return dir
}

func newDetector(opt thresholds.Options) func() nab.Detector {
	return func() nab.Detector {
		d, err := thresholds.New(opt)
		if err != nil {
			panic(err)
		}
		return d
	}
}

func TestNABTune(t *testing.T) {
	if os.Getenv("NAB_TUNE") == "" {
		t.Skip("set NAB_TUNE=1")
	}
	dir := datasetDir(t)
	ws, err := nab.ReadWindowsFile(filepath.Join(dir, "combined_windows.json"))
	if err != nil {
		t.Fatal(err)
	}
	series, err := nab.Detect(filepath.Join(dir, "data"), newDetector(thresholds.DefaultOptions()))
	if err != nil {
		t.Fatal(err)
	}
	res, err := nab.Score(series, ws, nab.Standard)
	if err != nil {
		t.Fatal(err)
	}
	diagnose(t, series, ws)
	for _, f := range res.Files {
		t.Logf("%-55s raw %6.2f windows %d detected %d fp %d", f.Name, f.Raw, f.Windows, f.Detected, f.FP)
	}
	t.Logf("score %.2f raw %.2f threshold %v windows %d detected %d fp %d", res.Score, res.Raw, res.Threshold, res.Windows, res.Detected, res.FP)
}
