package embedded

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/prometheus/prometheus/tsdb"
)

// dirLockName is the lock file of an Options.Dir.
const dirLockName = "governor-signals.lock"

// lockDir creates dir if needed and locks its lock file for as long as the
// returned file stays open: two DBs writing one TSDB directory would corrupt
// it. The lock goes with the process, however it ends.
func lockDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded: dir: %w", err)
	}
	name := filepath.Join(dir, dirLockName)
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("embedded: dir: %w", err)
	}
	ok, err := lockFile(f)
	if err != nil || !ok {
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("embedded: dir: lock %s: %w", name, err)
		}
		return nil, fmt.Errorf("embedded: dir %s is in use by another store (%s is locked)", dir, name)
	}
	return f, nil
}

// prepareDir removes the blocks of dir that cannot be opened
// (unreadable meta.json, index or chunks), logging each at error level: the
// TSDB refuses to start with one, and the store is a cache that scraping
// refills. It also removes the head chunks an earlier run left
// (chunks_head): without a write-ahead log they hold nothing the head can
// load again, and a torn file there stops the TSDB from opening too. dir
// must be locked.
func prepareDir(dir string, logger *slog.Logger) {
	if err := os.RemoveAll(filepath.Join(dir, "chunks_head")); err != nil {
		logger.Warn("embedded store: head chunks of an earlier run not removed", "dir", dir, "err", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return // tsdb.Open reports it
	}
	for _, e := range entries {
		if !e.IsDir() || !isULID(e.Name()) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		b, err := tsdb.OpenBlock(logger, path, nil, nil)
		if err == nil {
			_ = b.Close()
			continue
		}
		if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ENOMEM) ||
			errors.Is(err, fs.ErrPermission) {
			// Not the block's fault: left for tsdb.Open to report.
			logger.Warn("embedded store: TSDB block not checked", "block", path, "err", err)
			continue
		}
		rerr := os.RemoveAll(path)
		logger.Error("embedded store: corrupted TSDB block removed, its samples are lost", "block", path, "err", err, "remove_err", rerr)
	}
}

// isULID reports whether name has the form of a block's ULID (26
// characters of Crockford's base32), as the TSDB's own block listing
// requires.
func isULID(name string) bool {
	if len(name) != 26 {
		return false
	}
	for _, c := range strings.ToUpper(name) {
		if !strings.ContainsRune("0123456789ABCDEFGHJKMNPQRSTVWXYZ", c) {
			return false
		}
	}
	return true
}
