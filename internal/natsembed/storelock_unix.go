//go:build unix

package natsembed

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockStore takes an exclusive lock on dir for as long as the returned file
// stays open: two servers writing one JetStream store corrupt it, and the
// server itself does not guard against that. The lock is advisory (flock)
// and ends with the process, so a crash leaves nothing to clean up.
func lockStore(dir string) (*os.File, error) {
	path := filepath.Join(dir, storeLockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s is in use by another server (%s is locked)", dir, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}
