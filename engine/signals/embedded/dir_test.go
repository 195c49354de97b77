package embedded

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/stretchr/testify/require"
)

// writeBlock persists one block with a sample of up{job="x"} into dir.
func writeBlock(t *testing.T, dir string, ts int64) string {
	t.Helper()
	s := storage.NewListSeries(labels.FromStrings("__name__", "up", "job", "x"),
		[]chunks.Sample{blockSample{t: ts, f: 1}})
	bdir, err := tsdb.CreateBlock([]storage.Series{s}, dir, 0, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	return bdir
}

type blockSample struct {
	t int64
	f float64
}

func (s blockSample) T() int64                      { return s.t }
func (s blockSample) ST() int64                     { return 0 }
func (s blockSample) F() float64                    { return s.f }
func (s blockSample) H() *histogram.Histogram       { return nil }
func (s blockSample) FH() *histogram.FloatHistogram { return nil }
func (s blockSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s blockSample) Copy() chunks.Sample           { return s }

// A crash or a full disk can leave a block of Options.Dir unreadable: the
// TSDB refuses to open with one. The store is a cache that scraping
// refills, so Open removes the block, logs it and starts with the others.
func TestOpenRemovesACorruptedBlockAndStarts(t *testing.T) {
	dir := t.TempDir()
	now := time.Now().UnixMilli()
	good := writeBlock(t, dir, now-3*time.Hour.Milliseconds())
	badIndex := writeBlock(t, dir, now-time.Hour.Milliseconds())
	require.NoError(t, os.WriteFile(filepath.Join(badIndex, "index"), []byte("garbage"), 0o600))
	badMeta := writeBlock(t, dir, now-2*time.Hour.Milliseconds())
	require.NoError(t, os.WriteFile(filepath.Join(badMeta, "meta.json"), []byte("{"), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "chunks_head"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "chunks_head", "000001"), []byte("garbage"), 0o600))

	var logs bytes.Buffer
	db, err := Open(Options{Dir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	defer db.Close()
	require.NoDirExists(t, badIndex)
	require.NoDirExists(t, badMeta)
	require.DirExists(t, good)
	require.Contains(t, logs.String(), "corrupted TSDB block removed")
	require.Contains(t, logs.String(), filepath.Base(badIndex))

	res, err := db.Query(context.Background(), `up{job="x"}`, time.UnixMilli(now-3*time.Hour.Milliseconds()))
	require.NoError(t, err)
	require.Len(t, res.Samples, 1, "the intact block is still read")
}

// Two DBs writing one directory would corrupt it: the second fails to open
// it, naming the lock, until the first closes.
func TestOpenRefusesADirAnotherDBHolds(t *testing.T) {
	dir := t.TempDir()
	a, err := Open(Options{Dir: dir})
	require.NoError(t, err)
	_, err = Open(Options{Dir: dir})
	require.ErrorContains(t, err, "in use by another store")
	require.NoError(t, a.Close())
	b, err := Open(Options{Dir: dir})
	require.NoError(t, err)
	require.NoError(t, b.Close())
}
