package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
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
	bin := filepath.Join(dir, "engine")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	stdoutPath, stderrPath := filepath.Join(dir, "stdout"), filepath.Join(dir, "stderr")
	stdout, err := os.Create(stdoutPath)
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	stderr, err := os.Create(stderrPath)
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	cmd := exec.Command(bin, "-dev", "-listen", "127.0.0.1:0", "-data-dir", filepath.Join(dir, "var"))
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()
	read := func(p string) string {
		b, _ := os.ReadFile(p)
		return string(b)
	}
	base := ""
	deadline := time.Now().Add(time.Minute)
	for base == "" {
		select {
		case <-exited:
			t.Fatalf("exited at start: %v\n%s", waitErr, read(stderrPath))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no banner within a minute:\n%s\n%s", read(stdoutPath), read(stderrPath))
		}
		if m := regexp.MustCompile(`(http://127\.0\.0\.1:\d+)/healthz`).FindStringSubmatch(read(stdoutPath)); m != nil {
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
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatalf("still running a minute after SIGTERM:\n%s", read(stderrPath))
	}
	logs := read(stderrPath)
	if waitErr != nil {
		t.Fatalf("exit %v after SIGTERM, want 0:\n%s", waitErr, logs)
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
