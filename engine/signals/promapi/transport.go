package promapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/retry"
)

// ErrResponseTooLarge reports an answer larger than
// Options.MaxResponseBytes (decoded, after gzip). It is not retried: the
// same query would get the same answer.
var ErrResponseTooLarge = errors.New("promapi: response too large")

// transport wraps the caller's RoundTripper: it bounds the size of every
// answer and records a Retry-After header for the attempt (see attemptInfo).
type transport struct {
	rt    http.RoundTripper
	limit int64 // negative: none
	clk   clock.Clock
}

// attemptInfo is what transport learned of one attempt's answer.
type attemptInfo struct {
	mu         sync.Mutex
	retryAfter time.Duration
}

type attemptKey struct{}

func withAttempt(ctx context.Context, a *attemptInfo) context.Context {
	return context.WithValue(ctx, attemptKey{}, a)
}

func (a *attemptInfo) RetryAfter() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.retryAfter
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		if a, ok := req.Context().Value(attemptKey{}).(*attemptInfo); ok {
			if d, ok := retry.ParseRetryAfter(resp.Header.Get("Retry-After"), t.clk.Now()); ok {
				a.mu.Lock()
				a.retryAfter = d
				a.mu.Unlock()
			}
		}
	}
	if t.limit >= 0 {
		resp.Body = &limitedBody{rc: resp.Body, left: t.limit, limit: t.limit, declared: resp.ContentLength}
	}
	return resp, nil
}

// limitedBody fails a read past limit bytes with ErrResponseTooLarge.
type limitedBody struct {
	rc          io.ReadCloser
	left, limit int64
	declared    int64 // Content-Length, -1 if unknown
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.declared > b.limit {
		return 0, b.tooLarge()
	}
	if b.left <= 0 {
		// One more byte tells a body of exactly limit bytes from a longer one.
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			return 0, b.tooLarge()
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) tooLarge() error {
	return fmt.Errorf("%w: more than %d bytes (Options.MaxResponseBytes): narrow the query or raise the limit", ErrResponseTooLarge, b.limit)
}

func (b *limitedBody) Close() error { return b.rc.Close() }
