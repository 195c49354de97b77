package lab

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"governor.dev/governor/bench/report"
	"governor.dev/governor/bench/scenario"
	"governor.dev/governor/sdk/httpgov"
)

// hardCap is how long past its deadline the load generator keeps waiting
// for an answer (to tell late work from lost work) before it gives up.
const hardCap = 3 * time.Second

// loadgen is the live mode's open-loop load generator: it sends every
// request at its scheduled time whether or not earlier ones were answered,
// keeps client deadlines and retries as the scenario says.
type loadgen struct {
	s      *scenario.Scenario
	base   string
	client *http.Client
	reqs   []scenario.Request
	t0     time.Time

	mu       sync.Mutex
	budget   *scenario.Budget
	attempts []report.Attempt
	wg       sync.WaitGroup
}

func newClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns:        8192,
		MaxIdleConnsPerHost: 8192,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}}
}

// calibrate measures the server's capacity: a closed loop of workers sends
// requests with the scenario's CPU cost (no downstream wait) back to back
// for d and counts completions per second. The server must run the "none"
// limiter.
func calibrate(ctx context.Context, s *scenario.Scenario, base string, d time.Duration) (float64, error) {
	client := newClient()
	defer client.CloseIdleConnections()
	src := scenario.NewSource(s, 99)
	var mu sync.Mutex
	rng := src.Rand()
	var done atomic.Int64
	var firstErr atomic.Value
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) && ctx.Err() == nil {
				mu.Lock()
				cpu := s.Cost.CPU.Sample(rng)
				mu.Unlock()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/work", nil)
				req.Header.Set(hClass, "1")
				req.Header.Set(hCPU, strconv.FormatInt(int64(cpu), 10))
				req.Header.Set(hDeadline, strconv.FormatInt(time.Now().Add(time.Minute).UnixNano(), 10))
				resp, err := client.Do(req)
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if time.Now().Before(end) {
					done.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return 0, fmt.Errorf("lab: calibrate: %w", err)
	}
	return float64(done.Load()) / d.Seconds(), nil
}

// run plays the scenario against the server at base and returns every
// attempt once all are answered or given up.
func (lg *loadgen) run(ctx context.Context) ([]report.Attempt, error) {
	start, _ := http.NewRequestWithContext(ctx, http.MethodPost, lg.base+"/start", nil)
	resp, err := lg.client.Do(start)
	if err != nil {
		return nil, fmt.Errorf("lab: loadgen: start: %w", err)
	}
	resp.Body.Close()
	lg.t0 = time.Now()
	for i := range lg.reqs {
		at := lg.reqs[i].At
		if d := time.Until(lg.t0.Add(at)); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		lg.mu.Lock()
		lg.budget.First(at)
		lg.mu.Unlock()
		lg.wg.Add(1)
		go lg.attempt(ctx, int32(i), 0)
	}
	lg.wg.Wait()
	return lg.attempts, nil
}

func (lg *loadgen) retry(ctx context.Context, req int32, try uint8) {
	c := lg.s.Client
	if int(try)+1 >= c.MaxAttempts {
		return
	}
	at := time.Since(lg.t0) + c.Backoff.D()
	if at >= lg.s.Length() {
		return
	}
	lg.mu.Lock()
	ok := lg.budget.Retry(time.Since(lg.t0))
	lg.mu.Unlock()
	if !ok {
		return
	}
	lg.wg.Add(1)
	time.AfterFunc(c.Backoff.D(), func() { lg.attempt(ctx, req, try+1) })
}

func (lg *loadgen) attempt(ctx context.Context, req int32, try uint8) {
	defer lg.wg.Done()
	r := lg.reqs[req]
	sent := time.Now()
	a := report.Attempt{Request: req, Class: r.Class, Try: try, Start: sent.Sub(lg.t0)}
	deadline := sent.Add(lg.s.Client.Deadline.D())
	var answered atomic.Bool
	timer := time.AfterFunc(lg.s.Client.Deadline.D(), func() {
		if !answered.Load() {
			lg.retry(ctx, req, try) // the client gives up on this attempt
		}
	})
	rctx, cancel := context.WithDeadline(ctx, deadline.Add(hardCap))
	defer cancel()
	hr, _ := http.NewRequestWithContext(rctx, http.MethodGet, lg.base+"/work", nil)
	hr.Header.Set(hClass, strconv.Itoa(int(r.Class)))
	hr.Header.Set(hUser, strconv.FormatUint(r.User, 10))
	hr.Header.Set(hCPU, strconv.FormatInt(int64(r.CPU), 10))
	hr.Header.Set(hWait, strconv.FormatInt(int64(r.Wait), 10))
	hr.Header.Set(hDeadline, strconv.FormatInt(deadline.UnixNano(), 10))
	// The deadline as a service would receive it; every limiter gets it,
	// only Governor's adapters read it (limiters.Request.Deadline).
	hr.Header.Set(httpgov.HeaderDeadline, strconv.FormatInt(deadline.UnixMilli(), 10))
	resp, err := lg.client.Do(hr)
	a.Latency = time.Since(sent)
	late := a.Latency > lg.s.Client.Deadline.D()
	if !late {
		answered.Store(true)
		timer.Stop()
	}
	switch {
	case err != nil:
		a.Outcome = report.Failed
		if late {
			a.Outcome = report.Late // admitted (presumably) and never answered in time
		}
	case resp.StatusCode == http.StatusOK && !late:
		a.Outcome = report.OK
	case resp.StatusCode == http.StatusOK:
		a.Outcome = report.Late
	case resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode == http.StatusServiceUnavailable:
		a.Outcome = report.Rejected
		if !late {
			lg.retry(ctx, req, try)
		}
	default:
		a.Outcome = report.Failed
	}
	if resp != nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	lg.mu.Lock()
	lg.attempts = append(lg.attempts, a)
	lg.mu.Unlock()
}
