package testenv

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// Binary builds the main package in the test's directory into a temporary
// directory and returns the executable's path.
func Binary(t testing.TB, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// Process is a command a test started: its output collected in Stdout and
// Stderr, its exit awaited in the background, and killed when the test ends
// if it is still running.
type Process struct {
	Cmd            *exec.Cmd
	Stdout, Stderr *Buffer
	exited         chan struct{}
	err            error
}

// Start starts cmd with its output in the returned Process's buffers.
func Start(t testing.TB, cmd *exec.Cmd) *Process {
	t.Helper()
	p := &Process{Cmd: cmd, Stdout: &Buffer{}, Stderr: &Buffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.Stdout, p.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Err is the process's exit error (nil for status 0), once Exited is closed.
func (p *Process) Err() error { return p.err }
