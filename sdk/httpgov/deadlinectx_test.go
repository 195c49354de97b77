package httpgov

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

type ctxKey struct{}

// state is what a context shows: its deadline, its error, whether Done is
// closed, a value, and the error of a context derived from it.
type state struct {
	deadline time.Time
	err      error
	done     bool
	value    any
	child    error
}

func observe(ctx context.Context, useDone bool) state {
	var s state
	s.deadline, _ = ctx.Deadline()
	if useDone {
		select {
		case <-ctx.Done():
			s.done = true
		default:
		}
	}
	s.err = ctx.Err()
	if !useDone {
		s.done = s.err != nil
	}
	s.value = ctx.Value(ctxKey{})
	child, cancel := context.WithCancel(ctx)
	s.child = child.Err()
	cancel()
	return s
}

// TestDeadlineCtxActsAsTheStandardOne: in every case (deadline ahead or
// passed, parent alive or canceled, before and after cancel, with Done
// waited on or not) the lazy context shows what context.WithDeadline
// shows, and a context derived from it is canceled with it.
func TestDeadlineCtxActsAsTheStandardOne(t *testing.T) {
	ahead := time.Now().Add(time.Hour)
	passed := time.Now().Add(-time.Second)
	tests := []struct {
		name           string
		deadline       time.Time
		parentCanceled bool
		canceled       bool
	}{
		{"ahead", ahead, false, false},
		{"ahead, canceled", ahead, false, true},
		{"ahead, parent canceled", ahead, true, false},
		{"passed", passed, false, false},
		{"passed, canceled", passed, false, true},
		{"parent canceled, canceled", ahead, true, true},
	}
	for _, tt := range tests {
		for _, useDone := range []bool{false, true} {
			name := tt.name
			if useDone {
				name += ", Done used"
			}
			t.Run(name, func(t *testing.T) {
				mk := func() (context.Context, context.CancelFunc) {
					p, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
					if tt.parentCanceled {
						cancel()
					}
					return p, cancel
				}
				sp, spCancel := mk()
				defer spCancel()
				std, stdCancel := context.WithDeadline(sp, tt.deadline)
				defer stdCancel()
				lp, lpCancel := mk()
				defer lpCancel()
				r, lazy := withDeadline(httptest.NewRequest("GET", "/", nil).WithContext(lp), tt.deadline)
				if r.Context() != context.Context(lazy) {
					t.Fatal("the request does not carry the context")
				}
				defer lazy.cancel()
				if useDone {
					_ = lazy.Done()
				}
				if tt.canceled {
					stdCancel()
					lazy.cancel()
				}
				if tt.deadline.Equal(passed) && !tt.canceled && !tt.parentCanceled {
					<-std.Done() // the standard context's timer has fired
				}
				want, got := observe(std, useDone), observe(lazy, useDone)
				if !want.deadline.Equal(got.deadline) || !errors.Is(got.err, want.err) || want.done != got.done ||
					want.value != got.value || !errors.Is(got.child, want.child) {
					t.Fatalf("lazy %+v, standard %+v", got, want)
				}
				if got.err != nil && lazy.Err() != got.err {
					t.Fatal("Err changed once reported")
				}
				if got.err != nil {
					select {
					case <-lazy.Done():
					default:
						t.Fatal("Err reported but Done open")
					}
				}
			})
		}
	}
}

// TestDeadlineCtxCancelsDerivedContexts: a context derived before the
// request ends is canceled when it ends (cancel), without waiting, and the
// cause is the one the standard context gives.
func TestDeadlineCtxCancelsDerivedContexts(t *testing.T) {
	_, lazy := withDeadline(httptest.NewRequest("GET", "/", nil), time.Now().Add(time.Hour))
	child, cancel := context.WithTimeout(lazy, 2*time.Hour)
	defer cancel()
	if d, _ := child.Deadline(); !d.Equal(lazy.deadline) {
		t.Fatalf("child deadline %v, want the earlier %v", d, lazy.deadline)
	}
	ran := make(chan struct{})
	stop := context.AfterFunc(lazy, func() { close(ran) })
	defer stop()
	lazy.cancel()
	<-child.Done()
	if !errors.Is(child.Err(), context.Canceled) || !errors.Is(context.Cause(lazy), context.Canceled) {
		t.Fatalf("child %v, cause %v", child.Err(), context.Cause(lazy))
	}
	<-lazy.Done()
	<-ran // AfterFunc runs its function once the context ends
}

// TestDeadlineCtxConcurrentUse: Done, Err, Value and cancel race cleanly
// (run with -race) and agree at the end.
func TestDeadlineCtxConcurrentUse(t *testing.T) {
	for range 50 {
		_, lazy := withDeadline(httptest.NewRequest("GET", "/", nil), time.Now().Add(time.Hour))
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() {
				switch i {
				case 0:
					<-lazy.Done()
				case 1:
					for lazy.Err() == nil {
					}
				case 2:
					_ = lazy.Value(ctxKey{})
					_, _ = lazy.Deadline()
				case 3:
					lazy.cancel()
				}
			})
		}
		wg.Wait()
		if !errors.Is(lazy.Err(), context.Canceled) {
			t.Fatalf("err %v", lazy.Err())
		}
		<-lazy.Done()
	}
}
