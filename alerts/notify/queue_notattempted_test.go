package notify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"governor.dev/governor/alerts"
	"governor.dev/governor/sdk/clock"
)

// paced is a receiver that holds back its own attempts, as the PagerDuty
// receiver does ahead of a routing key's rate limit: for each group, the
// first len(script) attempts return the scripted outcome, the next ones
// succeed. A zero duration in the script is a real 503, a negative one a
// part delivered (ErrPartial) with a Retry-After of -d, a positive one "not
// attempted, try after d".
type paced struct {
	f      *clock.Fake
	mu     sync.Mutex
	script map[string][]time.Duration
	calls  map[string]int
	order  []string
}

const serverError time.Duration = 0

func (p *paced) Notify(_ context.Context, m *Message) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.order = append(p.order, m.GroupKey)
	i := p.calls[m.GroupKey]
	p.calls[m.GroupKey]++
	script := p.script[m.GroupKey]
	if i >= len(script) {
		return false, nil
	}
	if script[i] == serverError {
		return true, &StatusError{StatusCode: 503}
	}
	if script[i] < 0 {
		return true, fmt.Errorf("%w: rate limited: %w", ErrPartial, &StatusError{StatusCode: 429, RetryAfter: -script[i]})
	}
	se := &StatusError{StatusCode: 429, RetryAt: p.f.Now().Add(script[i])}
	return true, fmt.Errorf("held back ahead of the rate limit, no request sent: %w: %w", ErrNotAttempted, se)
}

func (p *paced) callsOf(group string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[group]
}

type outcome struct {
	group    string
	attempts int
	err      error
}

func newPacedQueue(t *testing.T, p *paced, o QueueOptions) (*Queue, *Metrics, chan outcome) {
	t.Helper()
	results := make(chan outcome, 4)
	o.Clock, o.Metrics = p.f, NewMetrics(nil)
	o.OnResult = func(m *Message, a int, err error) { results <- outcome{m.GroupKey, a, err} }
	q := NewQueue("pd", p, o)
	t.Cleanup(q.Close)
	return q, o.Metrics, results
}

func repeat(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

// A page held back by the receiver's own pacing for more rounds than
// MaxAttempts is delivered, each time at the slot the receiver named, and
// counts no failed attempt: nothing was ever sent and refused.
func TestPacedMessageIsDeliveredWithoutUsingAttempts(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	p := &paced{f: f, script: map[string][]time.Duration{"g": repeat(30*time.Second, 12)}, calls: map[string]int{}}
	q, m, results := newPacedQueue(t, p, QueueOptions{MaxAttempts: 8})
	q.Enqueue(&Message{GroupKey: "g", Severity: alerts.P0})
	for i := range 12 {
		waitTimer(t, f)
		f.Advance(30*time.Second - time.Millisecond)
		if f.Pending() != 1 || p.callsOf("g") != i+1 {
			t.Fatalf("round %d: tried again before the receiver's slot", i+1)
		}
		f.Advance(time.Millisecond)
	}
	r := <-results
	if r.err != nil {
		t.Fatalf("a message paced for 12 rounds was given up: %v", r.err)
	}
	if r.attempts != 1 {
		t.Fatalf("%d attempts counted, want 1: the rounds held back are no attempts", r.attempts)
	}
	for _, tt := range []struct {
		result string
		want   float64
	}{{"ok", 1}, {"deferred", 12}, {"retry", 0}, {"fail", 0}} {
		if got := testutil.ToFloat64(m.attempts.WithLabelValues("pd", tt.result)); got != tt.want {
			t.Errorf("attempts{result=%q} %v, want %v", tt.result, got, tt.want)
		}
	}
	if got := testutil.ToFloat64(m.failed.WithLabelValues("pd")); got != 0 {
		t.Errorf("failed %v, want 0", got)
	}
}

// Real server errors still use up attempts, with the back-off, whether or
// not rounds held back came before them.
func TestServerErrorsStillUseAttemptsBetweenPacedRounds(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	script := append(repeat(10*time.Second, 3), repeat(serverError, 20)...)
	p := &paced{f: f, script: map[string][]time.Duration{"g": script}, calls: map[string]int{}}
	q, m, results := newPacedQueue(t, p, QueueOptions{MaxAttempts: 8, InitialBackoff: time.Second, MaxBackoff: time.Minute})
	q.Enqueue(&Message{GroupKey: "g"})
	waits := append(repeat(10*time.Second, 3), time.Second, 2*time.Second, 4*time.Second, 8*time.Second, 16*time.Second,
		32*time.Second, time.Minute)
	for i, w := range waits {
		waitTimer(t, f)
		f.Advance(w - time.Millisecond)
		if f.Pending() != 1 {
			t.Fatalf("wait %d: tried again before %s", i+1, w)
		}
		f.Advance(time.Millisecond)
	}
	r := <-results
	if r.err == nil || !strings.Contains(r.err.Error(), "8 attempts") || r.attempts != 8 {
		t.Fatalf("result %+v, want given up after 8 attempts", r)
	}
	if got := p.callsOf("g"); got != 11 {
		t.Fatalf("%d calls, want 3 held back and 8 attempts", got)
	}
	for _, tt := range []struct {
		result string
		want   float64
	}{{"deferred", 3}, {"retry", 7}, {"fail", 1}} {
		if got := testutil.ToFloat64(m.attempts.WithLabelValues("pd", tt.result)); got != tt.want {
			t.Errorf("attempts{result=%q} %v, want %v", tt.result, got, tt.want)
		}
	}
}

// A receiver that never makes the attempt does not hold a message
// forever: it is given up once it has waited MaxDeferral, and the last
// try is at that bound.
func TestMessageNeverAttemptedIsGivenUpAfterMaxDeferral(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	p := &paced{f: f, script: map[string][]time.Duration{"g": repeat(time.Hour, 100)}, calls: map[string]int{}}
	q, m, results := newPacedQueue(t, p, QueueOptions{MaxDeferral: 12 * time.Minute})
	q.Enqueue(&Message{GroupKey: "g"})
	// Retry-After is cut to MaxRetryAfter; the last wait to what is left.
	for i, w := range []time.Duration{MaxRetryAfter, MaxRetryAfter, 2 * time.Minute} {
		waitTimer(t, f)
		f.Advance(w - time.Millisecond)
		if f.Pending() != 1 {
			t.Fatalf("wait %d: tried again before %s", i+1, w)
		}
		f.Advance(time.Millisecond)
	}
	r := <-results
	if !errors.Is(r.err, ErrNotAttempted) || !strings.Contains(r.err.Error(), "12m0s") || r.attempts != 0 {
		t.Fatalf("result %+v, want given up, not attempted for 12m0s", r)
	}
	if got := p.callsOf("g"); got != 4 {
		t.Fatalf("%d calls, want 4", got)
	}
	if got := testutil.ToFloat64(m.failed.WithLabelValues("pd")); got != 1 {
		t.Fatalf("failed %v, want 1", got)
	}
}

// While a message waits for its receiver's slot, a more urgent message of
// another group goes first; the waiting one then keeps its slot (it is
// not tried before it) and is delivered.
func TestMoreUrgentMessageGoesFirstWhileOneWaitsForItsSlot(t *testing.T) {
	tests := []struct {
		name string
		wait time.Duration // as in paced.script
	}{
		{"not attempted", time.Minute},
		{"delivered in part, with Retry-After", -time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := clock.NewFake(time.Unix(0, 0))
			p := &paced{f: f, script: map[string][]time.Duration{"p2": {tt.wait}}, calls: map[string]int{}}
			q, _, results := newPacedQueue(t, p, QueueOptions{})
			q.Enqueue(&Message{GroupKey: "p2", Severity: alerts.P2})
			waitTimer(t, f)
			f.Advance(20 * time.Second)
			q.Enqueue(&Message{GroupKey: "p0", Severity: alerts.P0})
			if r := <-results; r.group != "p0" || r.err != nil {
				t.Fatalf("first result %+v, want the P0 delivered while the P2 waits", r)
			}
			waitTimer(t, f)
			f.Advance(40*time.Second - time.Millisecond)
			if got := p.callsOf("p2"); got != 1 || f.Pending() != 1 {
				t.Fatalf("P2 tried %d times before its slot, want once", got)
			}
			f.Advance(time.Millisecond)
			if r := <-results; r.group != "p2" || r.err != nil || r.attempts != 1 {
				t.Fatalf("second result %+v, want the P2 delivered at its slot", r)
			}
		})
	}
}

// A more urgent message of the same group waits behind the held-back one:
// a group's messages keep their order.
func TestMoreUrgentMessageOfTheSameGroupWaitsBehindTheHeldBackOne(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	p := &paced{f: f, script: map[string][]time.Duration{"g": {time.Minute}}, calls: map[string]int{}}
	q, _, results := newPacedQueue(t, p, QueueOptions{})
	q.Enqueue(&Message{ID: "old", Receiver: "pd", GroupKey: "g", Severity: alerts.P2})
	waitTimer(t, f)
	q.Enqueue(&Message{ID: "new", Receiver: "pd", GroupKey: "g", Severity: alerts.P0})
	waitTimer(t, f)
	f.Advance(time.Minute)
	<-results
	<-results
	p.mu.Lock()
	defer p.mu.Unlock()
	if got := strings.Join(p.order, ","); got != "g,g,g" {
		t.Fatalf("calls %s", got)
	}
	if got := p.calls["g"]; got != 3 {
		t.Fatalf("%d calls, want 3", got)
	}
}
