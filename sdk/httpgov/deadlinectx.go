package httpgov

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// deadlineCtx is the context of a request that runs with its caller's
// deadline: what context.WithDeadline(parent, deadline) gives, made lazily.
// Deadline, Value and Err answer without a timer; the first Done makes the
// standard context (its timer, its place among the parent's children) and
// from then on everything is answered by it, so contexts derived from this
// one are canceled with it as they would be from the standard one. A
// handler that never waits on Done costs no timer.
//
// Err reports context.DeadlineExceeded from the deadline on (where the
// standard context reports it once its timer has fired), the parent's
// error once the parent is done, and context.Canceled after cancel; once
// it has reported an error it keeps reporting it, and Done is then closed.
type deadlineCtx struct {
	parent   context.Context
	deadline time.Time

	// made is set once inner and stop, written once under mu, are
	// context.WithDeadline(parent, deadline): read them only after
	// seeing made.
	made  atomic.Bool
	inner context.Context
	stop  context.CancelFunc
	mu    sync.Mutex // guards the making of inner, and err
	err   error      // the error reported before inner was made
}

// standard returns the standard context once it is made, nil before.
func (c *deadlineCtx) standard() context.Context {
	if c.made.Load() {
		return c.inner
	}
	return nil
}

// closedChan is the Done of a deadlineCtx that ended before anything
// waited on it.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// deadlineRequest holds a request copy that carries its caller's deadline
// and that copy's context, in one allocation.
type deadlineRequest struct {
	ctx deadlineCtx
	req http.Request
}

// withDeadline returns a shallow copy of r (as r.WithContext) whose context
// ends at deadline, and that context, whose cancel the caller calls when
// the handler returns.
func withDeadline(r *http.Request, deadline time.Time) (*http.Request, *deadlineCtx) {
	d := &deadlineRequest{ctx: deadlineCtx{parent: r.Context(), deadline: deadline}}
	d.req = *r.WithContext(&d.ctx)
	return &d.req, &d.ctx
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *deadlineCtx) Done() <-chan struct{} {
	if in := c.standard(); in != nil {
		return in.Done()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if in := c.standard(); in != nil {
		return in.Done()
	}
	if c.err != nil {
		return closedChan
	}
	c.inner, c.stop = context.WithDeadline(c.parent, c.deadline)
	c.made.Store(true)
	return c.inner.Done()
}

func (c *deadlineCtx) Err() error {
	if in := c.standard(); in != nil {
		return in.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if in := c.standard(); in != nil {
		return in.Err()
	}
	c.settle()
	return c.err
}

// settle records in err why the context has ended, if it has: its parent
// ended or its deadline passed; c.mu held, inner not made.
func (c *deadlineCtx) settle() {
	if c.err != nil {
		return
	}
	if err := c.parent.Err(); err != nil {
		c.err = err
	} else if !time.Now().Before(c.deadline) {
		c.err = context.DeadlineExceeded
	}
}

func (c *deadlineCtx) Value(key any) any {
	if in := c.standard(); in != nil {
		return in.Value(key)
	}
	return c.parent.Value(key)
}

func (c *deadlineCtx) String() string {
	return fmt.Sprintf("%v.WithDeadline(%s [%s])", c.parent, c.deadline, time.Until(c.deadline))
}

// cancel ends the context (context.Canceled), as the cancel function of
// context.WithDeadline does, and releases its timer if one was made.
func (c *deadlineCtx) cancel() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.made.Load() {
		c.stop()
		return
	}
	if c.settle(); c.err == nil {
		c.err = context.Canceled
	}
}
