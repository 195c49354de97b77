package nab_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

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

// standardFloor is the regression floor for the standard-profile score of
// thresholds.DefaultOptions on the NAB subset, just below the measured score.
const standardFloor = 67.5

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
	rows, err := nab.Run(context.Background(), filepath.Join(dir, "data"), out, newDetector(thresholds.DefaultOptions()))
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

func TestNABTune(t *testing.T) {
	if os.Getenv("NAB_TUNE") == "" {
		t.Skip("set NAB_TUNE=1")
	}
	dir := datasetDir(t)
	ws, err := nab.ReadWindowsFile(filepath.Join(dir, "combined_windows.json"))
	if err != nil {
		t.Fatal(err)
	}
	specs := strings.Split(os.Getenv("NAB_OPT"), ";")
	for _, spec := range specs {
		opt := thresholds.DefaultOptions()
		if spec != "" {
			setOptions(t, &opt, spec)
		}
		series, err := nab.Detect(filepath.Join(dir, "data"), newDetector(opt))
		if err != nil {
			t.Fatal(err)
		}
		res, err := nab.Score(series, ws, nab.Standard)
		if err != nil {
			t.Fatal(err)
		}
		if len(specs) == 1 {
			diagnose(t, series, ws)
			for _, f := range res.Files {
				t.Logf("%-55s raw %6.2f windows %d detected %d fp %d", f.Name, f.Raw, f.Windows, f.Detected, f.FP)
			}
		}
		fmt.Printf("%-60s score %.2f raw %.2f threshold %.4f detected %d fp %d\n", spec, res.Score, res.Raw, res.Threshold, res.Detected, res.FP)
	}
}

// setOptions applies "Field=value,Field=value" overrides for tuning runs.
func setOptions(t *testing.T, opt *thresholds.Options, spec string) {
	v := reflect.ValueOf(opt).Elem()
	for _, kv := range strings.Split(spec, ",") {
		k, val, _ := strings.Cut(kv, "=")
		idx := -1
		if i := strings.Index(k, "["); i > 0 {
			idx, _ = strconv.Atoi(k[i+1 : len(k)-1])
			k = k[:i]
		}
		f := v.FieldByName(k)
		if idx >= 0 {
			f = f.Index(idx)
		}
		if !f.IsValid() {
			t.Fatalf("no option %s", k)
		}
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(val == "true")
		case reflect.Float64:
			x, _ := strconv.ParseFloat(val, 64)
			f.SetFloat(x)
		case reflect.Int, reflect.Int64:
			if d, err := time.ParseDuration(val); err == nil {
				f.SetInt(int64(d))
			} else {
				x, _ := strconv.Atoi(val)
				f.SetInt(int64(x))
			}
		}
	}
}
