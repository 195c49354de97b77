package shutdown

import (
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"governor.dev/governor/internal/testenv"
)

// TestSecondSignalExitsAtOnce: an operator whose clean stop hangs (a
// request that never finishes, a dependency that does not answer) sends the
// signal again; the first SIGTERM ended the context and said so, the second
// exits with 128 + SIGINT's number without waiting for the stop.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	var logs testenv.Buffer
	exited := make(chan int, 1)
	ctx, stop := notify(slog.New(slog.NewTextHandler(&logs, nil)), func(code int) { exited <- code })
	defer stop()

	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the first SIGTERM did not end the context")
	}
	select {
	case code := <-exited:
		t.Fatalf("exit(%d) at the first signal", code)
	default:
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exited:
		if code != 130 {
			t.Fatalf("exit(%d) at the second signal, want 130", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the second signal did not exit")
	}
	out := logs.String()
	for _, want := range []string{"signal=terminated", "send it again to exit at once", "second signal", "signal=interrupt"} {
		if !strings.Contains(out, want) {
			t.Errorf("log %q does not contain %q", out, want)
		}
	}
}

// TestStopReleasesTheSignals: once the command has returned, stop ends the
// context and the helper no longer exits on a signal.
func TestStopReleasesTheSignals(t *testing.T) {
	ctx, stop := notify(slog.New(slog.DiscardHandler), func(code int) { t.Errorf("exit(%d) after stop", code) })
	stop()
	stop() // idempotent
	select {
	case <-ctx.Done():
	default:
		t.Fatal("context still live after stop")
	}
}

func TestCode(t *testing.T) {
	if got := Code(syscall.SIGTERM); got != 143 {
		t.Fatalf("Code(SIGTERM) = %d, want 143", got)
	}
	if got := Code(syscall.SIGINT); got != 130 {
		t.Fatalf("Code(SIGINT) = %d, want 130", got)
	}
}
