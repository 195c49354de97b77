package main

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"governor.dev/governor/internal/testenv"
)

// TestDevStackStopsCleanlyOnSIGTERM runs the built binary as an operator
// does (`engine -dev`, on a random loopback port, its data in a temporary
// directory): it serves /healthz, and at SIGTERM it logs that it is
// stopping (and that a second signal exits at once), stops everything it
// started and exits 0.
func TestDevStackStopsCleanlyOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the engine binary")
	}
	dir := t.TempDir()
	cmd := exec.Command(testenv.Binary(t, "engine"), "-dev", "-listen", "127.0.0.1:0", "-data-dir", filepath.Join(dir, "var"))
	cmd.Dir = dir
	proc := testenv.Start(t, cmd)
	base := ""
	deadline := time.Now().Add(time.Minute)
	for base == "" {
		select {
		case <-proc.Exited():
			t.Fatalf("exited at start: %v\n%s", proc.Err(), proc.Stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no banner within a minute:\n%s\n%s", proc.Stdout, proc.Stderr)
		}
		if m := regexp.MustCompile(`(http://127\.0\.0\.1:\d+)/healthz`).FindStringSubmatch(proc.Stdout.String()); m != nil {
			base = m[1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %d", resp.StatusCode)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-proc.Exited():
	case <-time.After(time.Minute):
		t.Fatalf("still running a minute after SIGTERM:\n%s", proc.Stderr)
	}
	logs := proc.Stderr.String()
	if err := proc.Err(); err != nil {
		t.Fatalf("exit %v after SIGTERM, want 0:\n%s", err, logs)
	}
	for _, want := range []string{"send it again to exit at once", "engine stopped"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "panic") {
		t.Errorf("panic in the log:\n%s", logs)
	}
}

// TestSignalDuringStartExitsZero: a SIGTERM that arrives while the engine
// starts (a pod terminated while it waits for its database) is a stop the
// operator asked for: exit 0, not 1 with "cannot start: context canceled"
// logged as an error.
func TestSignalDuringStartExitsZero(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stderr testenv.Buffer
	code := dispatch(ctx, []string{"run", "-dev", "-listen", "127.0.0.1:0", "-data-dir", filepath.Join(t.TempDir(), "var")}, io.Discard, &stderr)
	if code != 0 {
		t.Fatalf("exit %d, want 0\n%s", code, stderr.String())
	}
}
