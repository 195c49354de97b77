package nab_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/engine/thresholds"
	"governor.dev/governor/engine/thresholds/nab"
)

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
		series, err := nab.Detect(filepath.Join(dir, "data"), newDetector(t, opt))
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
