package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"governor.dev/governor/sdk/rules"
)

func TestParseRefusesBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-capacity", "0"}, "-capacity"},
		{[]string{"-work", "0s"}, "-work"},
		{[]string{"-load", "-1"}, "-load"},
		{[]string{"-duration", "-1s"}, "-duration"}, // was taken as 0: run until interrupted
		{[]string{"extra"}, "unexpected"},
		{[]string{"-nope"}, "not defined"},
	}
	for _, tt := range tests {
		_, err := parse(tt.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parse(%v) = %v, want an error about %s", tt.args, err, tt.want)
		}
	}
	c, err := parse(nil, io.Discard)
	if err != nil || c.capacity != 20 || c.load != 1500 {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
}

// TestDefaultRulesAreValid: every -capacity the flags accept (at least 1)
// gives valid rules; a small one (1 to 3) was accepted by the flags and then
// refused at start by the rules (an adaptive limit's floor above its initial
// value), with an error that did not name the flag.
func TestDefaultRulesAreValid(t *testing.T) {
	for _, capacity := range []int{1, 2, 3, 4, 20, 1000} {
		if _, err := parse([]string{"-capacity", strconv.Itoa(capacity)}, io.Discard); err != nil {
			t.Fatalf("-capacity %d: %v", capacity, err)
		}
		if err := defaultRules(capacity).Validate(); err != nil {
			t.Errorf("-capacity %d: %v", capacity, err)
		}
	}
}

func get(t *testing.T, c *http.Client, url string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestServiceServesRefusesAndExportsMetrics(t *testing.T) {
	rs := defaultRules(4)
	rs.Routes[0].RateLimit = &rules.RateLimit{Rate: 0.001, Burst: 2}
	d, err := newDemo(config{capacity: 4, work: time.Millisecond}, rs)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	srv := httptest.NewServer(d.handler())
	defer srv.Close()
	c := srv.Client()

	for i := range 2 {
		if code, _, body := get(t, c, srv.URL+"/api/work", "X-Traffic-Priority", "critical"); code != 200 || !strings.Contains(body, "served_in_ms") {
			t.Fatalf("request %d: %d %q", i, code, body)
		}
	}
	code, hdr, body := get(t, c, srv.URL+"/api/work")
	if code != 429 || hdr.Get("Retry-After") == "" || !strings.Contains(body, `"code":"rate_limited"`) {
		t.Fatalf("beyond the rate limit: %d %v %q, want 429 rate_limited with Retry-After", code, hdr, body)
	}
	if code, _, _ := get(t, c, srv.URL+"/api/work", "X-Caller", "prober"); code != 200 {
		t.Fatalf("exempt caller: %d", code)
	}
	if code, _, _ := get(t, c, srv.URL+"/healthz"); code != 200 {
		t.Fatalf("/healthz: %d", code)
	}
	_, _, metrics := get(t, c, srv.URL+"/metrics")
	for _, want := range []string{
		`governor_sdk_requests_total{class="critical",outcome="admitted",route="api",service="demo"} 2`,
		`governor_sdk_requests_total{class="core",outcome="rate_limited",route="api",service="demo"} 1`,
		`governor_sdk_requests_total{class="core",outcome="exempt",route="api",service="demo"} 1`,
		`governor_sdk_limit{route="api",service="demo"}`,
		`governor_sdk_rules_version{service="demo"} 1`,
		`process_cpu_seconds_total`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestRunRefusesInvalidRulesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.json")
	if err := os.WriteFile(path, []byte(`{"service":"demo","routes":[{"name":"api","match":{"path_prefix":"api"}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"-rules", path}, io.Discard, &stderr); code != 2 {
		t.Fatalf("exit code %d, want 2", code)
	}
	if !strings.Contains(stderr.String(), "routes[0].match.path_prefix") {
		t.Fatalf("the error does not name the field: %s", stderr.String())
	}
}

func TestRunStopsWhenCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if code := run(ctx, []string{"-addr", "127.0.0.1:0", "-load", "0"}, io.Discard, io.Discard); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
}

func TestPickFollowsTheMix(t *testing.T) {
	for _, tt := range []struct {
		u    float64
		want int
	}{{0, 0}, {0.09, 0}, {0.1, 1}, {0.39, 1}, {0.4, 2}, {0.7, 3}, {0.999, 3}} {
		if got := pick(tt.u); got != tt.want {
			t.Errorf("pick(%v) = %d, want %d", tt.u, got, tt.want)
		}
	}
}

// TestStoppedLoadLeavesNoConnectionToHoldUpTheShutdown: once the load
// generator has stopped, no connection it dialed is left open. A connection
// dialed for a request that another connection served, or that was
// canceled first, used to stay in the client's idle pool unused; the server
// counts such a connection as active for 5s when it shuts down, so a stop
// under load took 5s and often ended in "shutdown: context deadline
// exceeded" and exit status 1.
func TestStoppedLoadLeavesNoConnectionToHoldUpTheShutdown(t *testing.T) {
	d, err := newDemo(config{capacity: 4, work: time.Millisecond}, defaultRules(4)) // for the report
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer srv.Close()
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		newLoad(d, srv.URL, 5000, io.Discard).run(ctx)
		cancel()
	}
	shut, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Config.Shutdown(shut); err != nil {
		t.Fatalf("the server's shutdown waited for connections the stopped load left open: %v", err)
	}
}

// TestRunUnderLoadStopsCleanly: a run with the load generator on ends with
// status 0 at the end of -duration and leaves no goroutine behind (the
// generator used to outlive run).
func TestRunUnderLoadStopsCleanly(t *testing.T) {
	before := goleak.IgnoreCurrent()
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"-addr", "127.0.0.1:0", "-load", "500", "-capacity", "2", "-work", "50ms", "-duration", "1s"}, io.Discard, &stderr); code != 0 {
		t.Fatalf("exit %d, want 0; log:\n%s", code, stderr.String())
	}
	goleak.VerifyNone(t, before)
}
