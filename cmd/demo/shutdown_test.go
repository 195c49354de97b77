package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/internal/testenv"
)

// TestStopPastTheGraceEndsRequestsStillRunning: at a stop, a request that
// does not finish within the shutdown grace (here one that would run an
// hour) makes run return 1, and its connection is closed: it used to be
// left running past run's return, on a governor run had closed, until the
// process exited.
func TestStopPastTheGraceEndsRequestsStillRunning(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &testenv.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-load", "0", "-capacity", "4", "-work", "1h"}, io.Discard, stderr)
	}()
	var url string
	for url == "" {
		if m := regexp.MustCompile(`url=(http://\S+/api/work)`).FindStringSubmatch(stderr.String()); m != nil {
			url = m[1]
		}
		time.Sleep(5 * time.Millisecond)
	}
	reqDone := make(chan error, 1)
	go func() {
		resp, err := http.Get(url)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			_ = resp.Body.Close()
		}
		reqDone <- err
	}()
	for !strings.Contains(metrics(t, strings.TrimSuffix(url, "/api/work")+"/metrics"), `governor_sdk_inflight{route="api",service="demo"} 1`) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != 1 {
		t.Fatalf("exit %d, want 1: a request outlived the shutdown grace", code)
	}
	select {
	case <-reqDone:
	case <-time.After(30 * time.Second):
		t.Fatal("the request still runs after run returned")
	}
}

func metrics(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
