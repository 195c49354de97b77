//go:build !unix

package natsembed

import (
	"os"
	"path/filepath"
)

// lockStore keeps a lock file open in dir; without flock it does not keep
// a second server out.
func lockStore(dir string) (*os.File, error) {
	return os.OpenFile(filepath.Join(dir, storeLockName), os.O_RDWR|os.O_CREATE, 0o600)
}
