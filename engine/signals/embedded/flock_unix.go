//go:build unix

package embedded

import (
	"errors"
	"os"
	"syscall"
)

// sweeps: a lock file shows whether its directory is in use.
const sweeps = true

// lockFile takes an exclusive lock on f without waiting: false if another
// open file holds it.
func lockFile(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}
