package main

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"governor.dev/governor/internal/testenv"
)

// TestSecondSIGTERMExitsAtOnce: the operator stops the demo while a request
// that never finishes is in flight, so the clean stop waits for it (up to
// its 5s timeout, then exit 1). A second SIGTERM must end the process at
// once with 143 (128 + SIGTERM), not be swallowed until that timeout. The
// binary is built and run for real: the signal handling lives in main.
func TestSecondSIGTERMExitsAtOnce(t *testing.T) {
	cmd := exec.Command(testenv.Binary(t, "demo"), "-addr", "127.0.0.1:0", "-load", "0", "-capacity", "4", "-work", "1h")
	proc := testenv.Start(t, cmd)
	logs := proc.Stderr.String
	deadline := time.Now().Add(30 * time.Second)
	poll := func(what string, done func() bool) {
		t.Helper()
		for !done() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; log:\n%s", what, logs())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	addr := ""
	poll("the listening line", func() bool {
		if m := regexp.MustCompile(`url=http://(\S+)/api/work`).FindStringSubmatch(logs()); m != nil {
			addr = m[1]
		}
		return addr != ""
	})
	go func() {
		if resp, err := http.Get("http://" + addr + "/api/work"); err == nil {
			_ = resp.Body.Close()
		}
	}()
	poll("the request in flight", func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `governor_sdk_inflight{route="api",service="demo"} 1`)
	})

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The clean stop has begun once the listener refuses connections.
	poll("the listener to close", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return true
		}
		_ = c.Close()
		return false
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-proc.Exited():
	case <-time.After(30 * time.Second):
		t.Fatalf("still running after the second SIGTERM; log:\n%s", logs())
	}
	var ee *exec.ExitError
	if err := proc.Err(); !errors.As(err, &ee) || ee.ExitCode() != 143 {
		t.Fatalf("exit %v, want status 143 from the second SIGTERM; log:\n%s", proc.Err(), logs())
	}
	for _, want := range []string{"send it again to exit at once", "second signal"} {
		if !strings.Contains(logs(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs())
		}
	}
}
