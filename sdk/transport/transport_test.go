package transport

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"governor.dev/governor/sdk/balancer"
	"governor.dev/governor/sdk/breaker"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/outbound"
	"governor.dev/governor/sdk/rules"
)

// script is a base RoundTripper that answers from a function and records
// what it was sent.
type script struct {
	mu    sync.Mutex
	sent  []*http.Request
	body  []string
	reply func(n int, r *http.Request) (*http.Response, error)
}

func (s *script) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.sent = append(s.sent, r)
	var b string
	if r.Body != nil {
		raw, _ := io.ReadAll(r.Body)
		_ = r.Body.Close()
		b = string(raw)
	}
	s.body = append(s.body, b)
	n := len(s.sent)
	s.mu.Unlock()
	return s.reply(n, r)
}

func (s *script) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sent)
}

func status(code int, header ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	return &http.Response{StatusCode: code, Header: h, Body: io.NopCloser(strings.NewReader("x"))}
}

// zeroJitter makes every back-off wait 0, so tests need no timers unless a
// Retry-After asks for one.
func zeroJitter() float64 { return 0 }

func newClient(t *testing.T, clk clock.Clock, ds []rules.Downstream, base http.RoundTripper, mod func(*Options)) (*http.Client, *outbound.Set) {
	t.Helper()
	set, err := outbound.New(outbound.Options{Clock: clk, Float64: zeroJitter})
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Apply(ds); err != nil {
		t.Fatal(err)
	}
	opts := Options{Set: set, Base: base}
	if mod != nil {
		mod(&opts)
	}
	rt, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: rt}, set
}

func TestRetriesWhatIsSafeToRetry(t *testing.T) {
	tests := []struct {
		name      string
		method    string
		header    string
		body      string
		allowAll  bool
		wantSends int
		wantCode  int
	}{
		{"GET retried until success", http.MethodGet, "", "", false, 3, 200},
		{"PUT with a body replays it", http.MethodPut, "", "payload", false, 3, 200},
		{"POST is not retried", http.MethodPost, "", "payload", false, 1, 503},
		{"POST with an idempotency key", http.MethodPost, "Idempotency-Key", "payload", false, 3, 200},
		{"POST when allowed", http.MethodPost, "", "payload", true, 3, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &script{reply: func(n int, _ *http.Request) (*http.Response, error) {
				if n < 3 {
					return status(503), nil
				}
				return status(200), nil
			}}
			c, _ := newClient(t, clock.NewFake(time.Time{}),
				[]rules.Downstream{{Name: "api", Retry: &rules.Retry{MaxAttempts: 5, MinPerSecond: 100}}}, s,
				func(o *Options) { o.AllowNonIdempotent = tt.allowAll })
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			req, _ := http.NewRequest(tt.method, "http://api/x", body)
			if tt.header != "" {
				req.Header.Set(tt.header, "k1")
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.wantCode || s.count() != tt.wantSends {
				t.Fatalf("status %d after %d sends, want %d after %d", resp.StatusCode, s.count(), tt.wantCode, tt.wantSends)
			}
			for i, b := range s.body {
				if b != tt.body {
					t.Fatalf("send %d carried body %q, want %q", i, b, tt.body)
				}
			}
		})
	}
}

func TestRetryOnTransportErrorsAndNotOnOthers(t *testing.T) {
	tests := []struct {
		name      string
		reply     func(int) (*http.Response, error)
		wantSends int
	}{
		{"connection error", func(n int) (*http.Response, error) {
			if n == 1 {
				return nil, errors.New("connection reset")
			}
			return status(200), nil
		}, 2},
		{"500 is not retried", func(int) (*http.Response, error) { return status(500), nil }, 1},
		{"404 is not retried", func(int) (*http.Response, error) { return status(404), nil }, 1},
		{"attempts run out", func(int) (*http.Response, error) { return status(502), nil }, 3},
		// A 429 is no failure of the downstream (Failed), but it is
		// retried when it says when.
		{"429 with Retry-After is retried", func(n int) (*http.Response, error) {
			if n == 1 {
				return status(429, "Retry-After", "0"), nil
			}
			return status(200), nil
		}, 2},
		// A 429 that does not say when is not retried at once: it would
		// only spend the limiter's quota and the retry budget.
		{"429 without Retry-After is not retried", func(int) (*http.Response, error) { return status(429), nil }, 1},
		// A 429 asking for longer than MaxBackoff (1s) is not either.
		{"retry-after beyond max backoff", func(int) (*http.Response, error) { return status(429, "Retry-After", "3600"), nil }, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &script{reply: func(n int, _ *http.Request) (*http.Response, error) { return tt.reply(n) }}
			c, _ := newClient(t, clock.NewFake(time.Time{}),
				[]rules.Downstream{{Name: "api", Retry: &rules.Retry{MinPerSecond: 100}}}, s, nil)
			resp, err := c.Get("http://api/")
			if err == nil {
				resp.Body.Close()
			}
			if s.count() != tt.wantSends {
				t.Fatalf("%d sends, want %d (err %v)", s.count(), tt.wantSends, err)
			}
		})
	}
}

// synClock reads the time of a synctest bubble.
type synClock struct{}

func (synClock) Now() time.Time                       { return time.Now() }
func (synClock) Nanotime() int64                      { return time.Now().UnixNano() }
func (synClock) NewTimer(d time.Duration) clock.Timer { return clock.Real{}.NewTimer(d) }

func TestRetryAfterIsHonoured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var at []time.Time
		s := &script{reply: func(n int, _ *http.Request) (*http.Response, error) {
			at = append(at, time.Now())
			switch n {
			case 1:
				return status(429, "Retry-After", "2"), nil
			case 2:
				return status(503, "Retry-After", time.Now().Add(500*time.Millisecond).UTC().Format(http.TimeFormat)), nil
			}
			return status(200), nil
		}}
		c, _ := newClient(t, synClock{}, []rules.Downstream{{Name: "api",
			Retry: &rules.Retry{MaxBackoff: rules.Duration(5 * time.Second), MinPerSecond: 100}}}, s, nil)
		resp, err := c.Get("http://api/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if len(at) != 3 || at[1].Sub(at[0]) != 2*time.Second {
			t.Fatalf("attempts at %v: want the second 2s after the first", at)
		}
		// An HTTP date has one-second resolution: the wait is at most 500ms.
		if gap := at[2].Sub(at[1]); gap > 500*time.Millisecond {
			t.Fatalf("third attempt %v after the second, want at most 500ms", gap)
		}
	})
}

// A caller that cancels its request (a user navigates away, a hedged request
// loses) says nothing about the downstream's health: however often it
// happens, and whatever Failed says of context.Canceled, it must not open the
// downstream's breaker, eject an endpoint or keep a bulkhead slot.
func TestCallerCancellationIsNoDownstreamFailure(t *testing.T) {
	tests := []struct {
		name   string
		failed func(*http.Response, error) bool
	}{
		{"default Failed", nil},
		{"Failed counting every error", func(resp *http.Response, err error) bool { return err != nil || resp.StatusCode >= 500 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(time.Time{})
			s := &script{reply: func(_ int, r *http.Request) (*http.Response, error) {
				if err := r.Context().Err(); err != nil {
					return nil, err // what http.Transport returns for a canceled request
				}
				return status(200), nil
			}}
			c, set := newClient(t, clk, []rules.Downstream{{Name: "api",
				Breaker:  &rules.Breaker{MinCalls: 5},
				Bulkhead: &rules.Bulkhead{MaxConcurrent: 1},
				Balancer: &rules.Balancer{SlowStart: rules.Duration(time.Second)}}}, s,
				func(o *Options) { o.Failed = tt.failed })
			set.SetEndpoints("api", []string{"10.0.0.1:80"})
			clk.Advance(time.Second)
			for range 20 {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api/", nil)
				if resp, err := c.Do(req); err == nil {
					resp.Body.Close()
				}
			}
			d := set.Get("api")
			if ejected := d.Balancer().Ejected(clk.Nanotime()); len(ejected) != 0 {
				t.Fatalf("endpoints %v ejected after caller cancellations", ejected)
			}
			if n := d.Bulkhead().InFlight(); n != 0 {
				t.Fatalf("bulkhead holds %d slots after caller cancellations", n)
			}
			resp, err := c.Get("http://api/")
			if err != nil {
				t.Fatalf("a healthy downstream after 20 caller cancellations: %v", err)
			}
			resp.Body.Close()
		})
	}
}

// TestCallerCancelledProbeDecidesNothing: a downstream and its one endpoint
// were failing, so both breakers are open; their open periods end and the
// next request, the probe of both, is cancelled by its caller after 3s.
// Before, the attempt told the balancer it succeeded (closing the endpoint's
// breaker on no evidence and feeding 3s into its estimate) and kept the
// downstream breaker's only probe slot, so every request was refused until
// the probe round timed out. The abandoned attempt must decide nothing and
// give back both probe slots, so the next request probes at once.
func TestCallerCancelledProbeDecidesNothing(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	var (
		mu           sync.Mutex
		cancelCaller context.CancelFunc // set: the next attempt is cancelled mid-flight
		healthy      bool
	)
	s := &script{reply: func(_ int, r *http.Request) (*http.Response, error) {
		mu.Lock()
		defer mu.Unlock()
		if cancelCaller != nil {
			clk.Advance(3 * time.Second)
			cancelCaller()
			cancelCaller = nil
			return nil, r.Context().Err()
		}
		if !healthy {
			return status(500), nil
		}
		return status(200), nil
	}}
	var changes []string // of the endpoint's breaker
	set, err := outbound.New(outbound.Options{Clock: clk, Float64: zeroJitter, Hooks: outbound.Hooks{
		OnEndpointStateChange: func(_, _ string, from, to breaker.State) {
			changes = append(changes, from.String()+">"+to.String())
		}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Apply([]rules.Downstream{{Name: "api",
		Breaker:  &rules.Breaker{MinCalls: 3, OpenBase: rules.Duration(time.Second), HalfOpenProbes: 1},
		Balancer: &rules.Balancer{SlowStart: rules.Duration(time.Second)}}}); err != nil {
		t.Fatal(err)
	}
	set.SetEndpoints("api", []string{"10.0.0.1:80"})
	rt, err := New(Options{Set: set, Base: s})
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: rt}
	get := func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api/", nil)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	clk.Advance(time.Second)
	for range 3 {
		if err := get(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	d := set.Get("api")
	if ej := d.Balancer().Ejected(clk.Nanotime()); len(ej) != 1 || d.Breaker().State(clk.Nanotime()) != breaker.Open {
		t.Fatalf("ejected %v, downstream breaker %v: want both open", ej, d.Breaker().State(clk.Nanotime()))
	}
	e := d.Balancer().Endpoint("10.0.0.1:80")
	clk.Advance(time.Second) // both open periods are over
	mu.Lock()
	healthy = true
	mu.Unlock()
	for range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		mu.Lock()
		cancelCaller = cancel
		mu.Unlock()
		if err := get(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled request = %v, want context.Canceled", err)
		}
		if st := d.Breaker().State(clk.Nanotime()); st != breaker.HalfOpen {
			t.Fatalf("downstream breaker %v after a cancelled probe, want half-open", st)
		}
		if last := changes[len(changes)-1]; last != "open>half-open" {
			t.Fatalf("endpoint breaker changes %v: a cancelled probe decided its round", changes)
		}
		if n := e.InFlight(); n != 0 {
			t.Fatalf("%d calls in flight on the endpoint after a cancelled request", n)
		}
		if lat := time.Duration(e.Latency(clk.Nanotime(), float64(balancer.DefaultDecay))); lat >= time.Second {
			t.Fatalf("endpoint estimate %v: the cancelled attempt fed a sample", lat)
		}
	}
	if err := get(context.Background()); err != nil {
		t.Fatalf("request after cancelled probes = %v, want a probe", err)
	}
	if st := d.Breaker().State(clk.Nanotime()); st != breaker.Closed || changes[len(changes)-1] != "half-open>closed" {
		t.Fatalf("downstream breaker %v, endpoint breaker changes %v: want both closed by the probe", st, changes)
	}
}

func TestDefaultFailedAndRetryable(t *testing.T) {
	tests := []struct {
		name              string
		resp              *http.Response
		err               error
		failed, retryable bool
	}{
		{"200", status(200), nil, false, false},
		{"404", status(404), nil, false, false},
		{"429", status(429), nil, false, false},
		{"429 with Retry-After seconds", status(429, "Retry-After", "1"), nil, false, true},
		{"429 with a Retry-After date", status(429, "Retry-After", "Fri, 31 Dec 1999 23:59:59 GMT"), nil, false, true},
		{"429 with a malformed Retry-After", status(429, "Retry-After", "soon"), nil, false, false},
		{"500", status(500), nil, true, false},
		{"503", status(503), nil, true, true},
		{"connection error", nil, errors.New("connection reset"), true, true},
		{"timeout", nil, context.DeadlineExceeded, true, true},
		{"caller canceled", nil, context.Canceled, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DefaultFailed(tt.resp, tt.err); got != tt.failed {
				t.Errorf("DefaultFailed = %v, want %v", got, tt.failed)
			}
			if got := DefaultRetryable(tt.resp, tt.err); got != tt.retryable {
				t.Errorf("DefaultRetryable = %v, want %v", got, tt.retryable)
			}
		})
	}
}

func TestDeadlineStopsRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &script{reply: func(int, *http.Request) (*http.Response, error) { return status(503, "Retry-After", "1"), nil }}
		c, _ := newClient(t, synClock{}, []rules.Downstream{{Name: "api", Retry: &rules.Retry{MaxAttempts: 10, MinPerSecond: 100}}}, s, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api/", nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// Attempts at 0s, 1s, 2s; a fourth at 3s could not finish in time.
		if s.count() != 3 || resp.StatusCode != 503 {
			t.Fatalf("%d sends, status %d; want 3 and the last 503", s.count(), resp.StatusCode)
		}
	})
}

func TestOpenBreakerRefusesWithATestableError(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	s := &script{reply: func(int, *http.Request) (*http.Response, error) { return status(500), nil }}
	ds := []rules.Downstream{{Name: "api", Breaker: &rules.Breaker{MinCalls: 3}}}
	c, _ := newClient(t, clk, ds, s, nil)
	for range 3 {
		resp, err := c.Get("http://api/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	_, err := c.Get("http://api/")
	var rej *outbound.RejectedError
	if !errors.Is(err, breaker.ErrOpen) || !errors.As(err, &rej) || rej.StatusCode() != http.StatusServiceUnavailable {
		t.Fatalf("err = %v, want a RejectedError for an open breaker", err)
	}
	if s.count() != 3 {
		t.Fatalf("%d sends: the refused call reached the base", s.count())
	}
	// A fallback answers refused calls instead.
	fc, _ := newClient(t, clk, ds, s, func(o *Options) {
		o.Fallback = func(_ *http.Request, err error) (*http.Response, error) {
			return status(299, "X-Fallback", err.Error()), nil
		}
	})
	for range 3 {
		resp, _ := fc.Get("http://api/")
		resp.Body.Close()
	}
	resp, err := fc.Get("http://api/")
	if err != nil || resp.StatusCode != 299 || !strings.Contains(resp.Header.Get("X-Fallback"), "breaker: open") {
		t.Fatalf("fallback: %v %v", resp, err)
	}
	resp.Body.Close()
}

func TestBalancesAcrossEndpointsAndEjects(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	s := &script{reply: func(_ int, r *http.Request) (*http.Response, error) {
		clk.Advance(time.Millisecond)
		if r.URL.Host == "10.0.0.2:80" {
			return status(500), nil
		}
		return status(200), nil
	}}
	// Endpoint breakers share the downstream's breaker rules; a high ratio
	// keeps the downstream's own breaker closed while one endpoint fails.
	c, set := newClient(t, clk, []rules.Downstream{{Name: "api",
		Breaker:  &rules.Breaker{MinCalls: 3, ErrorRatio: 0.9},
		Balancer: &rules.Balancer{SlowStart: rules.Duration(time.Second)}}}, s, nil)
	set.SetEndpoints("api", []string{"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"})
	clk.Advance(time.Second)
	get := func() {
		resp, err := c.Get("http://api/x")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for range 50 {
		get()
	}
	hosts := map[string]int{}
	before := s.count()
	for range 100 {
		get()
	}
	for _, r := range s.sent[before:] {
		hosts[r.URL.Host]++
		if r.Host != "api" || r.URL.Path != "/x" {
			t.Fatalf("sent %q %q: the request was not only re-addressed", r.Host, r.URL.Path)
		}
	}
	if hosts["10.0.0.2:80"] != 0 || hosts["10.0.0.1:80"] < 20 || hosts["10.0.0.3:80"] < 20 {
		t.Fatalf("hosts %v: want the failing endpoint ejected and the rest shared", hosts)
	}
}

// TestAnEndpointThatShedsDoesNotDrawTraffic: an overloaded instance that
// sheds with fast 429s must not look like the fastest endpoint to the
// balancer and draw the traffic it is shedding.
func TestAnEndpointThatShedsDoesNotDrawTraffic(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	s := &script{reply: func(_ int, r *http.Request) (*http.Response, error) {
		if r.URL.Host == "10.0.0.1:80" {
			clk.Advance(time.Millisecond)
			return status(429, "Retry-After", "1"), nil
		}
		clk.Advance(10 * time.Millisecond)
		return status(200), nil
	}}
	c, set := newClient(t, clk, []rules.Downstream{{Name: "api"}}, s, nil)
	set.SetEndpoints("api", []string{"10.0.0.1:80", "10.0.0.2:80"})
	clk.Advance(time.Minute)
	hosts := map[string]int{}
	for range 200 {
		resp, err := c.Get("http://api/x")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for _, r := range s.sent[100:] {
		hosts[r.URL.Host]++
	}
	if hosts["10.0.0.1:80"] > 20 {
		t.Fatalf("hosts %v: the shedding endpoint drew the traffic", hosts)
	}
}

func TestAttemptTimeout(t *testing.T) {
	s := &script{reply: func(_ int, r *http.Request) (*http.Response, error) {
		<-r.Context().Done()
		return nil, r.Context().Err()
	}}
	c, _ := newClient(t, clock.Real{}, []rules.Downstream{{Name: "api", Timeout: rules.Duration(time.Millisecond)}}, s, nil)
	_, err := c.Get("http://api/")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the attempt's deadline", err)
	}
}

func TestUnknownDownstreamPassesThrough(t *testing.T) {
	s := &script{reply: func(int, *http.Request) (*http.Response, error) { return status(503), nil }}
	c, _ := newClient(t, clock.Real{}, []rules.Downstream{{Name: "api", Retry: &rules.Retry{}}}, s, nil)
	resp, err := c.Get("http://other/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s.count() != 1 {
		t.Fatalf("%d sends: an unprotected downstream was retried", s.count())
	}
	if _, err := New(Options{}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("New without a Set = %v", err)
	}
}

// TestBudgetCapsAmplification sends many requests to a downstream that always
// fails and checks total sends / requests stays within 1 + budget plus the
// floor's allowance.
func TestBudgetCapsAmplification(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	s := &script{reply: func(int, *http.Request) (*http.Response, error) { return status(503), nil }}
	const budget, floor, rps, seconds = 0.2, 1.0, 100, 30
	c, _ := newClient(t, clk, []rules.Downstream{{Name: "api",
		Retry: &rules.Retry{MaxAttempts: 5, Budget: budget, MinPerSecond: floor}}}, s, nil)
	for range rps * seconds {
		clk.Advance(time.Second / rps)
		resp, err := c.Get("http://api/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	amp := float64(s.count()) / (rps * seconds)
	bound := 1 + budget + floor*(seconds+10)/(rps*seconds)
	if amp > bound || amp < 1+budget*0.9 {
		t.Fatalf("amplification %.3f, want between %.3f and %.3f", amp, 1+budget*0.9, bound)
	}
}

// TestOverRealHTTP runs the transport against a real server on a loopback
// port.
func TestOverRealHTTP(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	c, _ := newClient(t, clock.Real{}, []rules.Downstream{{Name: host, Retry: &rules.Retry{}, Breaker: &rules.Breaker{},
		Bulkhead: &rules.Bulkhead{MaxConcurrent: 4}, Timeout: rules.Duration(5 * time.Second)}}, http.DefaultTransport, nil)
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok" || calls != 2 {
		t.Fatalf("body %q after %d calls", b, calls)
	}
}

func TestShadowModeNeverRefuses(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	s := &script{reply: func(int, *http.Request) (*http.Response, error) { return status(500), nil }}
	c, set := newClient(t, clk, []rules.Downstream{{Name: "api", Mode: rules.ModeShadow,
		Breaker: &rules.Breaker{MinCalls: 3}}}, s, nil)
	for range 10 {
		resp, err := c.Get("http://api/")
		if err != nil {
			t.Fatalf("shadow refused: %v", err)
		}
		resp.Body.Close()
	}
	if s.count() != 10 {
		t.Fatalf("%d sends, want all 10", s.count())
	}
	if st := set.Get("api").Breaker().State(clk.Nanotime()); st != breaker.Open {
		t.Fatalf("breaker %v: shadow mode should still learn", st)
	}
}

// TestAPanicMidAttemptLeaksNoSlot: a panic while an attempt is in flight,
// in Base, in an Options.Failed that forgets the response is nil on a
// transport error, or in a state-change hook, unwinds to a server's recovery
// middleware and the service goes on. Before, each such panic kept a
// bulkhead slot and the endpoint's in-flight count for good: after
// MaxConcurrent of them every call to the downstream was refused with 503,
// even once it had recovered. The attempt must give back what it took.
func TestAPanicMidAttemptLeaksNoSlot(t *testing.T) {
	refused := func(int, *http.Request) (*http.Response, error) { return nil, errors.New("connection refused") }
	tests := []struct {
		name   string
		reply  func(int, *http.Request) (*http.Response, error)
		failed func(*http.Response, error) bool
		hooks  outbound.Hooks
	}{
		{"Base panics", func(int, *http.Request) (*http.Response, error) { panic("bug in a round tripper") }, nil, outbound.Hooks{}},
		{"Failed dereferences a nil response", refused,
			func(resp *http.Response, _ error) bool { return resp.StatusCode >= 500 }, outbound.Hooks{}},
		{"the downstream breaker's hook panics", refused, nil, outbound.Hooks{
			OnStateChange: func(string, breaker.State, breaker.State) { panic("bug in a hook") }}},
		{"the endpoint breaker's hook panics", refused, nil, outbound.Hooks{
			OnEndpointStateChange: func(string, string, breaker.State, breaker.State) { panic("bug in a hook") }}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(time.Time{})
			set, err := outbound.New(outbound.Options{Clock: clk, Float64: zeroJitter, Hooks: tt.hooks})
			if err != nil {
				t.Fatal(err)
			}
			if err := set.Apply([]rules.Downstream{{Name: "api",
				Breaker:  &rules.Breaker{MinCalls: 5},
				Bulkhead: &rules.Bulkhead{MaxConcurrent: 3}}}); err != nil {
				t.Fatal(err)
			}
			set.SetEndpoints("api", []string{"10.0.0.1:80"})
			rt, err := New(Options{Set: set, Base: &script{reply: tt.reply}, Failed: tt.failed})
			if err != nil {
				t.Fatal(err)
			}
			panics := 0
			for range 6 {
				func() {
					defer func() {
						if recover() != nil {
							panics++
						}
					}()
					req, _ := http.NewRequest(http.MethodPost, "http://api/", nil)
					if resp, err := rt.RoundTrip(req); err == nil {
						resp.Body.Close()
					}
				}()
			}
			if panics == 0 {
				t.Fatal("nothing panicked")
			}
			d := set.Get("api")
			if n := d.Bulkhead().InFlight(); n != 0 {
				t.Errorf("after %d panics the bulkhead holds %d slots, want 0", panics, n)
			}
			if n := d.Balancer().Endpoint("10.0.0.1:80").InFlight(); n != 0 {
				t.Errorf("after %d panics the endpoint has %d calls in flight, want 0", panics, n)
			}
		})
	}
}
