//go:build !unix

package embedded

import "os"

// sweeps is false without flock: no directory is known to be abandoned, so
// sweepTempDirs removes nothing and a crash leaks its directory.
const sweeps = false

// lockFile takes no lock.
func lockFile(*os.File) (bool, error) { return true, nil }
