package transport

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// suppressions records Options.RetrySuppressed calls.
type suppressions struct {
	mu  sync.Mutex
	got []string
}

func (s *suppressions) record(downstream, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, downstream+"/"+reason)
}

func (s *suppressions) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.got, ",")
}

func retryingAPI() []rules.Downstream {
	return []rules.Downstream{{Name: "api", Retry: &rules.Retry{MaxAttempts: 3, MinPerSecond: 100}}}
}

func TestRetriesCarryTheirAttemptNumber(t *testing.T) {
	s := &script{reply: func(n int, _ *http.Request) (*http.Response, error) {
		if n < 3 {
			return status(503), nil
		}
		return status(200), nil
	}}
	c, _ := newClient(t, clock.NewFake(time.Time{}), retryingAPI(), s, nil)
	req, _ := http.NewRequest(http.MethodGet, "http://api/x", nil)
	// A proxy forwarding its own inbound headers: each hop states its own
	// count, so the stale one goes.
	req.Header.Set(HeaderAttempt, "7")
	req.Header.Set("X-Other", "kept")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var got []string
	for _, r := range s.sent {
		got = append(got, strings.Join(r.Header.Values(HeaderAttempt), "|"))
		if r.Header.Get("X-Other") != "kept" {
			t.Fatalf("attempt lost the caller's other headers: %v", r.Header)
		}
	}
	if strings.Join(got, ",") != ",2,3" {
		t.Fatalf("attempt headers %q, want none, 2, 3", got)
	}
	if req.Header.Get(HeaderAttempt) != "7" {
		t.Fatalf("the caller's request was modified: %v", req.Header)
	}
}

// TestAForwardedEnvoyAttemptCountIsNotSent: a handler that copies its
// inbound headers onto its own request (header propagation) must not pass
// its caller's Envoy attempt count on: the downstream would read that count
// as its own attempt number, take a first attempt for a retry, and make one
// attempt where it should retry.
func TestAForwardedEnvoyAttemptCountIsNotSent(t *testing.T) {
	s := &script{reply: func(n int, _ *http.Request) (*http.Response, error) {
		if n < 3 {
			return status(503), nil
		}
		return status(200), nil
	}}
	c, _ := newClient(t, clock.NewFake(time.Time{}), retryingAPI(), s, nil)
	req, _ := http.NewRequest(http.MethodGet, "http://api/x", nil)
	req.Header.Set(HeaderEnvoyAttempt, "3")
	req.Header.Set(HeaderAttempt, "3")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for i, r := range s.sent {
		if v := r.Header.Values(HeaderEnvoyAttempt); len(v) != 0 {
			t.Errorf("attempt %d carried %s %q", i+1, HeaderEnvoyAttempt, v)
		}
		n, err := InboundAttemptOf(r.Header)
		if n != i+1 || err != nil {
			t.Errorf("attempt %d reads as attempt %d (%v) downstream", i+1, n, err)
		}
	}
	if req.Header.Get(HeaderEnvoyAttempt) != "3" {
		t.Fatalf("the caller's request was modified: %v", req.Header)
	}
}

// TestAttemptHeadersInLowerCaseAreNotForwarded: net/http sends a header
// key as the map holds it, and the server canonicalises it, so a handler
// that copies its inbound headers under a non-canonical key (a map literal,
// req.Header["x-envoy-attempt-count"] = ..., keys from gRPC metadata) passed
// its caller's attempt count on: the downstream took each first attempt for
// a retry. Under the canonical or the lower-case key, a forwarded attempt
// header is not sent, and each attempt reads downstream as its own number;
// under other spellings, it is removed from retries.
func TestAttemptHeadersInLowerCaseAreNotForwarded(t *testing.T) {
	tests := []struct {
		name   string
		header http.Header
		want   string // the attempt numbers the downstream reads
	}{
		{"Envoy's in lower case", http.Header{"x-envoy-attempt-count": {"3"}}, "1 2 3"},
		{"ours in lower case", http.Header{"x-request-attempt": {"7"}}, "1 2 3"},
		{"both spellings of both", http.Header{
			HeaderAttempt: {"7"}, "x-request-attempt": {"8"},
			HeaderEnvoyAttempt: {"3"}, "x-envoy-attempt-count": {"4"},
		}, "1 2 3"},
		{"Envoy's in capitals, on retries", http.Header{"X-ENVOY-ATTEMPT-COUNT": {"3"}}, "3 2 3"},
		{"ours in mixed case, on retries", http.Header{"X-Request-attempt": {"7"}}, "7 2 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var got []string
			down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n, err := InboundAttemptOf(r.Header)
				if err != nil {
					t.Errorf("downstream: %v", err)
				}
				mu.Lock()
				got = append(got, strconv.Itoa(n))
				sends := len(got)
				mu.Unlock()
				if sends < 3 {
					w.WriteHeader(http.StatusServiceUnavailable)
				}
			}))
			defer down.Close()
			base := &http.Transport{}
			defer base.CloseIdleConnections()
			c, _ := newClient(t, clock.NewFake(time.Time{}), retryingAPI(), base, func(o *Options) {
				o.Downstream = func(*http.Request) string { return "api" }
			})
			req, _ := http.NewRequest(http.MethodGet, down.URL, nil)
			req.Header = tt.header.Clone()
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			if s := strings.Join(got, " "); s != tt.want {
				t.Fatalf("the downstream read attempts %s, want %s", s, tt.want)
			}
			if !reflect.DeepEqual(req.Header, tt.header) {
				t.Fatalf("the caller's request was modified: %v", req.Header)
			}
		})
	}
}

func TestLowerCaseAttemptHeaderNames(t *testing.T) {
	if lowerAttempt != strings.ToLower(HeaderAttempt) || lowerEnvoyAttempt != strings.ToLower(HeaderEnvoyAttempt) {
		t.Fatalf("%q, %q: not the lower-case spellings of %q, %q", lowerAttempt, lowerEnvoyAttempt, HeaderAttempt, HeaderEnvoyAttempt)
	}
}

func TestARequestServingARetryMakesOneAttempt(t *testing.T) {
	tests := []struct {
		name        string
		inbound     int
		allowNested bool
		wantSends   int
		wantSupp    string
	}{
		{"first inbound attempt retries", 1, false, 3, ""},
		{"inbound retry gets one attempt", 2, false, 1, "api/inbound_retry"},
		{"inbound retry with nested retries allowed", 3, true, 3, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &script{reply: func(int, *http.Request) (*http.Response, error) { return status(503), nil }}
			sup := &suppressions{}
			c, _ := newClient(t, clock.NewFake(time.Time{}), retryingAPI(), s, func(o *Options) {
				o.AllowNestedRetries = tt.allowNested
				o.RetrySuppressed = sup.record
			})
			ctx := WithInboundAttempt(context.Background(), tt.inbound)
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api/x", nil)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 503 || s.count() != tt.wantSends || sup.String() != tt.wantSupp {
				t.Fatalf("status %d after %d sends, suppressed %q; want 503 after %d, suppressed %q",
					resp.StatusCode, s.count(), sup, tt.wantSends, tt.wantSupp)
			}
		})
	}
}

func TestOverloadedResponsesAreNotRetried(t *testing.T) {
	tests := []struct {
		name      string
		resp      func() *http.Response
		wantSends int
		wantSupp  string
	}{
		{"shed 429 with overloaded", func() *http.Response {
			return status(429, "Retry-After", "0", HeaderOverloaded, "true")
		}, 1, "api/overloaded"},
		{"503 with Envoy's overloaded", func() *http.Response {
			return status(503, HeaderEnvoyOverloaded, "true")
		}, 1, "api/overloaded"},
		{"rate limit 429 is retried after Retry-After", func() *http.Response {
			return status(429, "Retry-After", "0")
		}, 3, ""},
		{"plain 503 is retried", func() *http.Response { return status(503) }, 3, ""},
		{"overloaded on a response Retryable refuses counts nothing", func() *http.Response {
			return status(500, HeaderOverloaded, "true")
		}, 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &script{reply: func(int, *http.Request) (*http.Response, error) { return tt.resp(), nil }}
			sup := &suppressions{}
			c, _ := newClient(t, clock.NewFake(time.Time{}), retryingAPI(), s, func(o *Options) { o.RetrySuppressed = sup.record })
			resp, err := c.Get("http://api/x")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if s.count() != tt.wantSends || sup.String() != tt.wantSupp {
				t.Fatalf("%d sends, suppressed %q; want %d, %q", s.count(), sup, tt.wantSends, tt.wantSupp)
			}
		})
	}
}

func TestInboundAttempt(t *testing.T) {
	ctx := context.Background()
	if n := InboundAttempt(ctx); n != 1 {
		t.Fatalf("InboundAttempt of a bare context = %d, want 1", n)
	}
	if WithInboundAttempt(ctx, 1) != ctx {
		t.Fatal("a first attempt wrapped the context")
	}
	if n := InboundAttempt(WithInboundAttempt(ctx, 4)); n != 4 {
		t.Fatalf("InboundAttempt = %d, want 4", n)
	}
}

func TestInboundAttemptOf(t *testing.T) {
	tests := []struct {
		name    string
		header  map[string]string
		want    int
		wantErr string
	}{
		{"none", nil, 1, ""},
		{"ours", map[string]string{HeaderAttempt: "3"}, 3, ""},
		{"Envoy's", map[string]string{HeaderEnvoyAttempt: "2"}, 2, ""},
		{"the larger of both", map[string]string{HeaderAttempt: "2", HeaderEnvoyAttempt: "5"}, 5, ""},
		{"a bad one is skipped and named", map[string]string{HeaderAttempt: "two", HeaderEnvoyAttempt: "2"}, 2, HeaderAttempt},
		{"zero", map[string]string{HeaderAttempt: "0"}, 1, "count from 1"},
		{"too long", map[string]string{HeaderAttempt: "1234567"}, 1, "1 to 6 digits"},
		{"signed", map[string]string{HeaderAttempt: "+2"}, 1, "1 to 6 digits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			n, err := InboundAttemptOf(h)
			if n != tt.want {
				t.Fatalf("attempt %d, want %d", n, tt.want)
			}
			if (err != nil) != (tt.wantErr != "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestInboundAttemptOfReportsBothMalformedHeaders: with both headers
// malformed, the error names both.
func TestInboundAttemptOfReportsBothMalformedHeaders(t *testing.T) {
	n, err := InboundAttemptOf(http.Header{HeaderAttempt: {"x"}, HeaderEnvoyAttempt: {"0"}})
	if n != 1 || err == nil || !strings.Contains(err.Error(), HeaderAttempt) || !strings.Contains(err.Error(), HeaderEnvoyAttempt) {
		t.Fatalf("InboundAttemptOf = %d, %v; want 1 and an error naming both headers", n, err)
	}
}

func TestInboundAttemptOfWithValidCountsDoesNotAllocate(t *testing.T) {
	h := http.Header{HeaderAttempt: {"2"}, HeaderEnvoyAttempt: {"3"}}
	if a := testing.AllocsPerRun(100, func() {
		if n, err := InboundAttemptOf(h); n != 3 || err != nil {
			t.Fatalf("InboundAttemptOf = %d, %v", n, err)
		}
	}); a != 0 {
		t.Fatalf("%v allocations, want 0", a)
	}
}

func TestFirstAttemptAllocatesNothingForTheHeader(t *testing.T) {
	req, _ := http.NewRequest(http.MethodGet, "http://api/x", nil)
	req.Header.Set("X-Other", "v")
	if a := testing.AllocsPerRun(100, func() {
		if withAttempt(req, 1) != req {
			t.Fatal("first attempt copied the request")
		}
	}); a != 0 {
		t.Fatalf("%v allocations per first attempt, want 0", a)
	}
}

// FuzzParseAttempt: the attempt parser never panics, accepts exactly 1 to 6
// digits naming an attempt of at least 1, and round-trips what it accepts.
func FuzzParseAttempt(f *testing.F) {
	for _, s := range []string{"1", "2", "007", "0", "", "-1", "+2", " 2", "999999", "1000000", "1e3", "٣"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		n, err := ParseAttempt(v)
		if err != nil {
			if n != 0 {
				t.Fatalf("ParseAttempt(%q) = %d with error %v", v, n, err)
			}
			return
		}
		if n < 1 || n > 999999 || len(v) > 6 {
			t.Fatalf("ParseAttempt(%q) = %d, out of range", v, n)
		}
		if strings.TrimLeft(v, "0") != strconv.Itoa(n) {
			t.Fatalf("ParseAttempt(%q) = %d does not round-trip", v, n)
		}
		h := http.Header{HeaderEnvoyAttempt: {v}}
		if m, err := InboundAttemptOf(h); err != nil || m != n {
			t.Fatalf("InboundAttemptOf(%q) = %d, %v; want %d", v, m, err, n)
		}
	})
}

// FuzzAttemptKey: a retry's clone drops a header key as an attempt header
// exactly when a server reads it as one (net/http canonicalises the keys it
// receives).
func FuzzAttemptKey(f *testing.F) {
	for _, k := range []string{HeaderAttempt, HeaderEnvoyAttempt, "x-request-attempt", "X-ENVOY-ATTEMPT-COUNT",
		"X-Forwarded-Proto", "X_Request_Attempt", "X-Reque\u017ft-Attempt", "x-request-attempt ", "X-Request-Attempts", ""} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, k string) {
		c := http.CanonicalHeaderKey(k)
		want := c == HeaderAttempt || c == HeaderEnvoyAttempt
		if got := attemptKey(k); got != want {
			t.Fatalf("attemptKey(%q) = %v, but a server reads it as %q", k, got, c)
		}
	})
}
