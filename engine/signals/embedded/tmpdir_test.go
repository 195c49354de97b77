package embedded

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// crashEnv makes the test binary open a DB and exit without closing it.
const crashEnv = "GOVERNOR_EMBEDDED_CRASH"

// crashWithOpenDB opens a DB without a Dir, prints its directory and exits
// at once, as an engine killed or crashed would: nothing is closed.
func crashWithOpenDB() {
	db, err := Open(Options{})
	if err != nil {
		os.Exit(2)
	}
	os.Stdout.WriteString("dir=" + db.dir + "\n")
	os.Exit(3)
}

// crashedRun runs a process that crashes with a DB open under TMPDIR and
// returns the directory it left.
func crashedRun(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"=1")
	out, err := cmd.Output()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	require.Equal(t, 3, exit.ExitCode(), "the crashing process: %s", out)
	for sc := bufio.NewScanner(bytes.NewReader(out)); sc.Scan(); {
		if d, ok := strings.CutPrefix(sc.Text(), "dir="); ok {
			require.DirExists(t, d, "the crashed run's directory")
			return d
		}
	}
	t.Fatalf("the crashing process printed no directory: %s", out)
	return ""
}

// TestOpenRemovesTheTempDirOfACrashedRun: an engine started without a
// metrics directory (make run, -dev) keeps its TSDB in a temporary
// directory, which a crash or kill -9 cannot remove. Every start made a
// new one, so they piled up. Open now removes those of processes that
// ended (their lock file is free) and leaves those in use, by another
// process or this one, alone; Close removes its own, lock file included.
func TestOpenRemovesTheTempDirOfACrashedRun(t *testing.T) {
	root := t.TempDir()
	t.Setenv("TMPDIR", root)
	live, err := Open(Options{})
	require.NoError(t, err)
	crashed := crashedRun(t)
	require.FileExists(t, crashed+".lock")

	db, err := Open(Options{})
	require.NoError(t, err)
	require.NoDirExists(t, crashed, "the directory of the crashed run")
	require.NoFileExists(t, crashed+".lock")
	require.DirExists(t, live.dir, "the directory of a DB still open")
	require.DirExists(t, db.dir)

	require.NoError(t, live.Close())
	require.NoError(t, db.Close())
	left, err := os.ReadDir(root)
	require.NoError(t, err)
	require.Empty(t, left, "what closed DBs left in the temporary directory")
}

// TestSweepLeavesOthersAlone: only a crashed run's pair is swept; a lock
// file whose directory is gone goes too, other names stay.
func TestSweepLeavesOthersAlone(t *testing.T) {
	root := t.TempDir()
	for _, name := range []string{"governor-signals-1.lock", "other.lock", "governor-signals-2"} {
		require.NoError(t, os.WriteFile(filepath.Join(root, name), nil, 0o600))
	}
	sweepTempDirs(root)
	_, err := os.Stat(filepath.Join(root, "governor-signals-1.lock"))
	require.ErrorIs(t, err, os.ErrNotExist)
	require.FileExists(t, filepath.Join(root, "other.lock"))
	require.FileExists(t, filepath.Join(root, "governor-signals-2"))
}
