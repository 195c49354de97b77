package nab

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// counter scores each sample with its index, so outputs are easy to check.
type counter struct{ n float64 }

func (c *counter) Score(time.Time, float64) float64 { c.n++; return c.n / 1000 }

func writeCorpus(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestRunAndDetectAgree(t *testing.T) {
	data := writeCorpus(t, map[string]string{
		"a/x.csv":     "timestamp,value\n2014-04-01 00:00:00,1\n2014-04-01 00:05:00,2\n",
		"b/y.csv":     "timestamp,value\n2014-04-01 00:00:00,5\n",
		"b/notes.txt": "ignored",
		"top.csv":     "timestamp,value\n", // not in a category: ignored
	})
	fresh := func() Detector { return &counter{} } // a fresh detector per file
	out := t.TempDir()
	n, err := Run(context.Background(), data, out, fresh)
	if err != nil || n != 3 {
		t.Fatalf("Run: %d rows, %v; want 3 rows", n, err)
	}
	fromFiles, err := ReadResults(out)
	if err != nil {
		t.Fatal(err)
	}
	inMemory, err := Detect(data, fresh)
	if err != nil {
		t.Fatal(err)
	}
	if len(fromFiles) != 2 || len(inMemory) != 2 {
		t.Fatalf("got %d and %d series, want 2", len(fromFiles), len(inMemory))
	}
	for i := range fromFiles {
		a, b := fromFiles[i], inMemory[i]
		if a.Name != b.Name || !slices.Equal(a.Scores, b.Scores) || len(a.Times) != len(b.Times) {
			t.Errorf("series %d: files %+v, memory %+v", i, a, b)
		}
	}
	if want := []float64{0.001, 0.002}; !slices.Equal(fromFiles[0].Scores, want) {
		t.Errorf("a/x.csv scores %v, want %v (fresh detector per file)", fromFiles[0].Scores, want)
	}
}

func TestRunErrors(t *testing.T) {
	fresh := func() Detector { return &counter{} }
	bad := writeCorpus(t, map[string]string{"a/x.csv": "timestamp,value\n2014-04-01 00:00:00,oops\n"})
	if _, err := Run(context.Background(), bad, t.TempDir(), fresh); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "a/x.csv") {
		t.Errorf("bad value: err %v, want ErrFormat naming the file", err)
	}
	if _, err := Run(context.Background(), t.TempDir(), t.TempDir(), fresh); err == nil || !strings.Contains(err.Error(), "no <category>/<file>.csv") {
		t.Errorf("empty dir: err %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	good := writeCorpus(t, map[string]string{"a/x.csv": "timestamp,value\n"})
	if _, err := Run(ctx, good, t.TempDir(), fresh); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err %v, want context.Canceled", err)
	}
}
