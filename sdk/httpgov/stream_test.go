package httpgov_test

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/httpgov"
	"governor.dev/governor/sdk/rules"
)

// hijackable is a recorder that can be hijacked, as a WebSocket upgrade does.
type hijackable struct{ *httptest.ResponseRecorder }

func (h hijackable) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, s := net.Pipe()
	s.Close()
	return c, bufio.NewReadWriter(bufio.NewReader(c), bufio.NewWriter(c)), nil
}

// TestStreamsAreNoLatencySample: a server-sent event feed and a WebSocket
// held open for ten minutes give their slot back but no latency sample (one
// would be read as a ten-minute service time, in the duration histogram and
// by the adaptive limit of every request on the route); a plain response,
// flushed or not, is one.
func TestStreamsAreNoLatencySample(t *testing.T) {
	clk := clock.NewFake(time.Now())
	reg := prometheus.NewRegistry()
	g := newGovernor(t, clk, reg, rules.Route{Name: "api", Match: rules.Match{PathPrefix: "/"},
		Concurrency: &rules.Concurrency{Algorithm: rules.AlgorithmFixed, Max: 5}})
	h := httpgov.Middleware(g, httpgov.Options{Clock: clk})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/events":
			w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
			w.Write([]byte("data: 1\n\n"))
			w.(http.Flusher).Flush()
			clk.Advance(10 * time.Minute)
		case "/ws":
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Errorf("Hijack: %v", err)
				return
			}
			clk.Advance(10 * time.Minute)
			conn.Close()
		case "/flushed":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte("{"))
			w.(http.Flusher).Flush()
			clk.Advance(30 * time.Millisecond)
			w.Write([]byte("}"))
		default:
			clk.Advance(10 * time.Millisecond)
		}
	}))
	for _, p := range []string{"/events", "/ws", "/flushed", "/plain"} {
		h.ServeHTTP(hijackable{httptest.NewRecorder()}, httptest.NewRequest("GET", p, nil))
	}
	if n := g.InFlight("api"); n != 0 {
		t.Fatalf("in flight %d after the requests, want 0", n)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var count uint64
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == "governor_sdk_request_duration_seconds" {
			for _, m := range mf.GetMetric() {
				count += m.GetHistogram().GetSampleCount()
				sum += m.GetHistogram().GetSampleSum()
			}
		}
	}
	if count != 2 || sum > 0.1 {
		t.Fatalf("duration histogram: %d samples summing %.3fs, want the flushed JSON and the plain response's 40 ms", count, sum)
	}
}
