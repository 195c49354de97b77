package nab

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Detector scores one series, one sample at a time, with no look-ahead.
type Detector interface {
	// Score takes the next sample and returns its anomaly score in [0, 1].
	Score(t time.Time, v float64) float64
}

// Files lists the corpus names (`<category>/<file>.csv`) of the data files
// under dir, sorted. Files directly in dir or nested deeper are ignored.
func Files(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("nab: data dir: %w", err)
	}
	var names []string
	for _, cat := range entries {
		if !cat.IsDir() {
			continue
		}
		files, err := os.ReadDir(filepath.Join(dir, cat.Name()))
		if err != nil {
			return nil, fmt.Errorf("nab: data dir: %w", err)
		}
		for _, f := range files {
			if f.Type().IsRegular() && strings.HasSuffix(f.Name(), ".csv") {
				names = append(names, cat.Name()+"/"+f.Name())
			}
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("nab: data dir %s: no <category>/<file>.csv files", dir)
	}
	slices.Sort(names)
	return names, nil
}

// Run streams every data file under dataDir through a fresh detector from
// newDetector and writes the scored rows under outDir with the same
// `<category>/<file>.csv` names. It returns the number of rows scored.
// It stops between files when ctx is done.
func Run(ctx context.Context, dataDir, outDir string, newDetector func() Detector) (int, error) {
	names, err := Files(dataDir)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("nab: %w", err)
		}
		n, err := runFile(filepath.Join(dataDir, filepath.FromSlash(name)), filepath.Join(outDir, filepath.FromSlash(name)), newDetector())
		total += n
		if err != nil {
			return total, fmt.Errorf("%s: %w", name, err)
		}
	}
	return total, nil
}

func runFile(in, out string, d Detector) (n int, err error) {
	src, err := os.Open(in)
	if err != nil {
		return 0, fmt.Errorf("nab: %w", err)
	}
	defer src.Close()
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return 0, fmt.Errorf("nab: %w", err)
	}
	dst, err := os.Create(out)
	if err != nil {
		return 0, fmt.Errorf("nab: %w", err)
	}
	defer func() {
		if cerr := dst.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("nab: %w", cerr)
		}
	}()
	w, err := NewWriter(dst)
	if err != nil {
		return 0, fmt.Errorf("nab: %w", err)
	}
	r := NewReader(src)
	for {
		row, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return n, err
		}
		if err := w.Write(row, d.Score(row.Time, row.Value)); err != nil {
			return n, fmt.Errorf("nab: %w", err)
		}
		n++
	}
	if err := w.Flush(); err != nil {
		return n, fmt.Errorf("nab: %w", err)
	}
	return n, nil
}

// Detect runs the detectors in memory and returns their output, for scoring
// without writing files.
func Detect(dataDir string, newDetector func() Detector) ([]Series, error) {
	names, err := Files(dataDir)
	if err != nil {
		return nil, err
	}
	out := make([]Series, 0, len(names))
	for _, name := range names {
		s, err := detectFile(dataDir, name, newDetector())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, s)
	}
	return out, nil
}

func detectFile(dir, name string, d Detector) (Series, error) {
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(name)))
	if err != nil {
		return Series{}, fmt.Errorf("nab: %w", err)
	}
	defer f.Close()
	s := Series{Name: name}
	r := NewReader(f)
	for {
		row, err := r.Next()
		if errors.Is(err, io.EOF) {
			return s, nil
		}
		if err != nil {
			return s, err
		}
		s.Times = append(s.Times, row.Time)
		s.Scores = append(s.Scores, d.Score(row.Time, row.Value))
	}
}

// ReadResults reads detector output files (`timestamp,value,anomaly_score`)
// written by Run under dir.
func ReadResults(dir string) ([]Series, error) {
	names, err := Files(dir)
	if err != nil {
		return nil, err
	}
	out := make([]Series, 0, len(names))
	for _, name := range names {
		s, err := readResult(dir, name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, s)
	}
	return out, nil
}

func readResult(dir, name string) (Series, error) {
	b, err := fs.ReadFile(os.DirFS(dir), name)
	if err != nil {
		return Series{}, fmt.Errorf("nab: %w", err)
	}
	recs, err := csv.NewReader(strings.NewReader(string(b))).ReadAll()
	if err != nil {
		return Series{}, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	if len(recs) == 0 || !slices.Equal(recs[0], []string{"timestamp", "value", "anomaly_score"}) {
		return Series{}, fmt.Errorf("%w: want header timestamp,value,anomaly_score", ErrFormat)
	}
	s := Series{Name: name}
	for i, rec := range recs[1:] {
		t, err := ParseTime(rec[0])
		if err != nil {
			return Series{}, fmt.Errorf("%w: line %d: %w", ErrFormat, i+2, err)
		}
		v, err := strconv.ParseFloat(rec[2], 64)
		if err != nil {
			return Series{}, fmt.Errorf("%w: line %d: anomaly_score %q", ErrFormat, i+2, rec[2])
		}
		s.Times = append(s.Times, t)
		s.Scores = append(s.Scores, v)
	}
	return s, nil
}
