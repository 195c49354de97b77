package transport

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// trackedBody counts its Close calls.
type trackedBody struct {
	io.Reader
	closed *atomic.Int32
}

func (b trackedBody) Close() error { b.closed.Add(1); return nil }

// TestDiscardedAttemptsBodiesAreClosed: the response of every attempt that
// is retried is drained and closed, or its connection is never reused and
// its memory stays until the GC finds it.
func TestDiscardedAttemptsBodiesAreClosed(t *testing.T) {
	var closed atomic.Int32
	s := &script{reply: func(n int, _ *http.Request) (*http.Response, error) {
		if n < 3 {
			r := status(503)
			r.Body = trackedBody{strings.NewReader("busy"), &closed}
			return r, nil
		}
		return status(200), nil
	}}
	c, _ := newClient(t, clock.NewFake(time.Time{}),
		[]rules.Downstream{{Name: "api", Retry: &rules.Retry{MinPerSecond: 100}}}, s, nil)
	resp, err := c.Get("http://api/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || closed.Load() != 2 {
		t.Fatalf("status %d, %d discarded bodies closed; want 200 and 2", resp.StatusCode, closed.Load())
	}
}

// TestABodyThatCannotBeReplayedIsNotRetried: a request whose body was read by
// the first attempt and has no GetBody is sent once, idempotent or not.
func TestABodyThatCannotBeReplayedIsNotRetried(t *testing.T) {
	var closed atomic.Int32
	s := &script{reply: func(int, *http.Request) (*http.Response, error) { return status(503), nil }}
	c, _ := newClient(t, clock.NewFake(time.Time{}),
		[]rules.Downstream{{Name: "api", Retry: &rules.Retry{MinPerSecond: 100}}}, s, nil)
	req, _ := http.NewRequest(http.MethodPut, "http://api/", trackedBody{strings.NewReader("x"), &closed})
	if req.GetBody != nil {
		t.Fatal("the request has a GetBody")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s.count() != 1 || resp.StatusCode != 503 {
		t.Fatalf("%d sends, status %d; want 1 and 503", s.count(), resp.StatusCode)
	}
}

// TestACallerLeavingDuringBackoffEndsTheRequest: a caller that cancels while
// the transport waits out a Retry-After gets its context's error at once; the
// discarded response is closed and no further attempt is made.
func TestACallerLeavingDuringBackoffEndsTheRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var closed atomic.Int32
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s := &script{reply: func(int, *http.Request) (*http.Response, error) {
			r := status(503, "Retry-After", "1")
			r.Body = trackedBody{strings.NewReader("busy"), &closed}
			time.AfterFunc(100*time.Millisecond, cancel) // in the back-off
			return r, nil
		}}
		c, _ := newClient(t, synClock{}, []rules.Downstream{{Name: "api", Retry: &rules.Retry{MinPerSecond: 100}}}, s, nil)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api/", nil)
		start := time.Now()
		_, err := c.Do(req)
		if err == nil || s.count() != 1 || closed.Load() != 1 {
			t.Fatalf("err %v after %d sends, %d bodies closed; want an error after 1, 1", err, s.count(), closed.Load())
		}
		if took := time.Since(start); took != 100*time.Millisecond {
			t.Fatalf("returned after %v, want when the caller left (100ms)", took)
		}
	})
}
