package watch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"governor.dev/governor/sdk/rules"
)

// ErrCache is wrapped by every failure to read or write the cache file.
var ErrCache = errors.New("watch: cache")

// LoadCache reads the last-known-good envelope of the service from path. A
// missing file returns (nil, nil); a corrupt one, or one for another service,
// an error wrapping ErrCache.
func LoadCache(path, service string) (*rules.Envelope, error) {
	env, _, err := readCache(path, service)
	return env, err
}

// readCache is LoadCache that also returns the content of a file that does
// not decode as an envelope (nil otherwise), so that the version it names
// can be NACKed.
func readCache(path, service string) (*rules.Envelope, []byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w: read %s: %w", ErrCache, path, err)
	}
	env, err := rules.DecodeEnvelope(data)
	if err != nil {
		return nil, data, fmt.Errorf("%w: %s: %w", ErrCache, path, err)
	}
	if env.Service != service {
		return nil, nil, fmt.Errorf("%w: %s holds service %q, not %q", ErrCache, path, env.Service, service)
	}
	return env, nil, nil
}

// SaveCache writes data to path atomically: a temporary file in the same
// directory, fsync, rename over path, fsync of the directory. A reader sees
// the old file or the new one, never a mix, even after a crash.
func SaveCache(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("%w: %w", ErrCache, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCache, err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("%w: write %s: %w", ErrCache, tmp, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("%w: sync %s: %w", ErrCache, tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%w: close %s: %w", ErrCache, tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("%w: rename to %s: %w", ErrCache, path, err)
	}
	ok = true
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
