package embedded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// tempPrefix names the temporary directories of DBs opened without a Dir.
const tempPrefix = "governor-signals-"

// tempDir is the temporary directory of a DB opened without a Dir: dir,
// and beside it dir+".lock", a file this process holds locked (flock) for
// as long as the DB is open. The lock goes with the process, however it
// ends, so a directory whose lock file can be locked was left by a process
// that crashed (or was killed) before it could remove it.
type tempDir struct {
	dir  string
	lock *os.File
}

// newTempDir removes the temporary directories earlier processes left
// (sweepTempDirs), then makes one for this DB under os.TempDir().
func newTempDir() (*tempDir, error) {
	root := os.TempDir()
	sweepTempDirs(root)
	for range 10 {
		f, err := os.CreateTemp(root, tempPrefix+"*.lock")
		if err != nil {
			return nil, fmt.Errorf("embedded: temp dir: %w", err)
		}
		// Locked and still there: a sweep between the creation and the
		// lock may have taken the file for a crashed run's and removed it.
		if ok, err := lockFile(f); err != nil || !ok || !stillThere(f) {
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("embedded: temp dir: %w", err)
			}
			continue
		}
		dir := strings.TrimSuffix(f.Name(), ".lock")
		if err := os.Mkdir(dir, 0o700); err != nil {
			os.Remove(f.Name())
			f.Close()
			if errors.Is(err, os.ErrExist) {
				continue
			}
			return nil, fmt.Errorf("embedded: temp dir: %w", err)
		}
		return &tempDir{dir: dir, lock: f}, nil
	}
	return nil, errors.New("embedded: temp dir: no free name")
}

// remove deletes the directory, then the lock file, then lets the lock go.
func (t *tempDir) remove() error {
	err := os.RemoveAll(t.dir)
	if rerr := os.Remove(t.lock.Name()); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return errors.Join(err, t.lock.Close())
}

// sweepTempDirs removes, under root, the temporary directories (and their
// lock files) of DBs whose process has ended without closing them: those
// whose lock file this process can lock. A directory in use elsewhere, or
// in this process, keeps its lock and is left alone. Failures are ignored:
// the sweep is tidying, not a condition to start.
func sweepTempDirs(root string) {
	if !sweeps {
		return
	}
	locks, _ := filepath.Glob(filepath.Join(root, tempPrefix+"*.lock"))
	for _, name := range locks {
		f, err := os.OpenFile(name, os.O_RDWR, 0) // never create one
		if err != nil {
			continue
		}
		if ok, err := lockFile(f); err == nil && ok && stillThere(f) {
			_ = os.RemoveAll(strings.TrimSuffix(name, ".lock"))
			_ = os.Remove(name)
		}
		f.Close() // the lock goes with it, after the removal
	}
}

// stillThere reports whether f's name still names f.
func stillThere(f *os.File) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(f.Name())
	return err == nil && os.SameFile(a, b)
}
