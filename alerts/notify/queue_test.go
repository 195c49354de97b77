package notify

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"governor.dev/governor/alerts"
	"governor.dev/governor/sdk/clock"
)

// scripted fails the first failures attempts (retryable), then succeeds.
type scripted struct {
	mu       sync.Mutex
	failures int
	calls    int
	block    chan struct{}
}

func (s *scripted) Notify(ctx context.Context, _ *Message) (bool, error) {
	if s.block != nil {
		select {
		case <-s.block:
		case <-ctx.Done():
			return true, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.calls <= s.failures {
		return true, errors.New("boom")
	}
	return false, nil
}

func waitTimer(t *testing.T, f *clock.Fake) {
	t.Helper()
	for f.Pending() == 0 {
		runtime.Gosched()
	}
}

func TestQueueRetriesWithBackoff(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	type result struct {
		attempts int
		err      error
	}
	results := make(chan result, 1)
	n := &scripted{failures: 2}
	q := NewQueue("pd", n, QueueOptions{Clock: f, Metrics: m, InitialBackoff: time.Second, MaxAttempts: 5,
		OnResult: func(_ *Message, a int, err error) { results <- result{a, err} }})
	defer q.Close()
	if !q.Enqueue(&Message{GroupKey: "g"}) {
		t.Fatal("enqueue refused")
	}
	waitTimer(t, f)
	f.Advance(999 * time.Millisecond) // first back-off is 1s
	if f.Pending() != 1 {
		t.Fatal("retried before the back-off ended")
	}
	f.Advance(time.Millisecond)
	waitTimer(t, f)
	f.Advance(2 * time.Second) // doubled
	r := <-results
	if r.err != nil || r.attempts != 3 {
		t.Fatalf("result %+v, want success on attempt 3", r)
	}
	if err := q.Idle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.attempts.WithLabelValues("pd", "retry")); got != 2 {
		t.Fatalf("retry attempts %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.sent.WithLabelValues("pd")); got != 1 {
		t.Fatalf("sent %v", got)
	}
}

func TestQueueGivesUpAfterMaxAttempts(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	m := NewMetrics(nil)
	results := make(chan error, 1)
	q := NewQueue("hook", &scripted{failures: 100}, QueueOptions{Clock: f, Metrics: m, MaxAttempts: 2,
		OnResult: func(_ *Message, _ int, err error) { results <- err }})
	defer q.Close()
	q.Enqueue(&Message{})
	waitTimer(t, f)
	f.Advance(time.Second)
	if err := <-results; err == nil || !strings.Contains(err.Error(), "2 attempts") {
		t.Fatalf("err %v", err)
	}
	if got := testutil.ToFloat64(m.failed.WithLabelValues("hook")); got != 1 {
		t.Fatalf("failed %v", got)
	}
}

func TestQueueBoundedDropsAndCounts(t *testing.T) {
	m := NewMetrics(nil)
	n := &scripted{block: make(chan struct{})}
	q := NewQueue("slow", n, QueueOptions{Capacity: 2, Metrics: m})
	defer q.Close()
	accepted := 0
	for range 10 {
		if q.Enqueue(&Message{}) {
			accepted++
		}
	}
	// At most capacity+1 (one may already be in the worker's hands).
	if accepted < 2 || accepted > 3 {
		t.Fatalf("accepted %d", accepted)
	}
	if got := testutil.ToFloat64(m.dropped.WithLabelValues("slow")); got != float64(10-accepted) {
		t.Fatalf("dropped %v, want %d", got, 10-accepted)
	}
	close(n.block)
	if err := q.Idle(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestValidateURL(t *testing.T) {
	tests := []struct {
		url, want string
	}{
		{"https://example.com/hook", ""},
		{"http://127.0.0.1:9/x", ""},
		{"ftp://example.com", `scheme "ftp"`},
		{"file:///etc/passwd", `scheme "file"`},
		{"example.com/hook", `scheme ""`},
		{"http://", "has no host"},
		{"http://[::1", "url"},
	}
	for _, tt := range tests {
		err := ValidateURL("url", tt.url)
		if tt.want == "" {
			if err != nil {
				t.Fatalf("%q: %v", tt.url, err)
			}
			continue
		}
		if err == nil || !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Fatalf("%q: %v, want %q", tt.url, err, tt.want)
		}
	}
}

func TestNewMessageCommonLabels(t *testing.T) {
	t0 := time.Unix(0, 0)
	as := []Alert{
		{Alert: alerts.Alert{Labels: alerts.Labels{"service": "a", "severity": "P2", "x": "1"}, StartsAt: t0}, Status: StatusFiring},
		{Alert: alerts.Alert{Labels: alerts.Labels{"service": "a", "severity": "P1", "x": "2"}, StartsAt: t0}, Status: StatusFiring},
		{Alert: alerts.Alert{Labels: alerts.Labels{"service": "a", "severity": "P0", "x": "2"}, StartsAt: t0, EndsAt: t0}, Status: StatusResolved},
	}
	m := NewMessage(KindNotify, "r", "g", alerts.Labels{"service": "a"}, as, t0)
	if m.Status != StatusFiring || m.Severity != alerts.P1 {
		t.Fatalf("status %s severity %s, want firing P1 (the resolved P0 does not count)", m.Status, m.Severity)
	}
	if len(m.CommonLabels) != 1 || m.CommonLabels["service"] != "a" {
		t.Fatalf("common labels %v", m.CommonLabels)
	}
	if len(m.Firing()) != 2 {
		t.Fatal("firing")
	}
}

// TestQueueRetireFinishesQueued: a retired queue refuses new messages but
// delivers what it had accepted, retries included, then stops.
func TestQueueRetireFinishesQueued(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	m := NewMetrics(nil)
	n := &scripted{failures: 1, block: make(chan struct{})}
	var mu sync.Mutex
	var delivered []string
	q := NewQueue("old", n, QueueOptions{Clock: f, Metrics: m, InitialBackoff: time.Second,
		OnResult: func(msg *Message, _ int, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				delivered = append(delivered, msg.ID)
			}
		}})
	defer q.Close()
	for _, id := range []string{"a", "b", "c"} {
		if !q.Enqueue(&Message{ID: id}) {
			t.Fatalf("enqueue %s refused", id)
		}
	}
	done := q.Retire()
	if q.Enqueue(&Message{ID: "late"}) {
		t.Fatal("a retired queue accepted a message")
	}
	if got := testutil.ToFloat64(m.dropped.WithLabelValues("old")); got != 1 {
		t.Fatalf("dropped %v, want 1", got)
	}
	close(n.block)
	waitTimer(t, f) // "a" failed once and waits for its back-off
	select {
	case <-done:
		t.Fatal("the retired queue stopped with a message still retrying")
	default:
	}
	f.Advance(time.Second)
	<-done
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(delivered, ",") != "a,b,c" {
		t.Fatalf("delivered %v, want a,b,c", delivered)
	}
	if err := q.Idle(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// retryAfter refuses the first len(waits) attempts as a rate-limited
// receiver does (429 with Retry-After), then accepts.
type retryAfter struct {
	mu    sync.Mutex
	waits []time.Duration
	calls int
}

func (r *retryAfter) Notify(context.Context, *Message) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.calls > len(r.waits) {
		return false, nil
	}
	return true, &StatusError{StatusCode: 429, RetryAfter: r.waits[r.calls-1]}
}

// A receiver's Retry-After sets the wait before the next attempt when it
// is longer than the back-off, up to MaxRetryAfter; a shorter one leaves
// the back-off: a rate-limited receiver is not hammered, nor held for
// hours by one header.
func TestQueueHonoursRetryAfter(t *testing.T) {
	tests := []struct {
		name  string
		waits []time.Duration
		want  []time.Duration // the waits before attempts 2, 3, ...
	}{
		{"longer than the back-off", []time.Duration{30 * time.Second, 30 * time.Second}, []time.Duration{30 * time.Second, 30 * time.Second}},
		{"bounded", []time.Duration{time.Hour}, []time.Duration{MaxRetryAfter}},
		{"shorter than the back-off", []time.Duration{0, time.Second, time.Second}, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := clock.NewFake(time.Unix(0, 0))
			done := make(chan error, 1)
			n := &retryAfter{waits: tt.waits}
			q := NewQueue("pd", n, QueueOptions{Clock: f, Metrics: NewMetrics(nil), InitialBackoff: time.Second, MaxAttempts: 8,
				OnResult: func(_ *Message, _ int, err error) { done <- err }})
			defer q.Close()
			q.Enqueue(&Message{})
			for i, w := range tt.want {
				waitTimer(t, f)
				f.Advance(w - time.Millisecond)
				if f.Pending() != 1 {
					t.Fatalf("attempt %d made before %s", i+2, w)
				}
				f.Advance(time.Millisecond)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			n.mu.Lock()
			defer n.mu.Unlock()
			if n.calls != len(tt.want)+1 {
				t.Fatalf("%d attempts, want %d", n.calls, len(tt.want)+1)
			}
		})
	}
}

// recorder holds the first message until release is closed and records
// the order of delivery.
type recorder struct {
	started chan struct{}
	release chan struct{}
	mu      sync.Mutex
	got     []string
}

func (r *recorder) Notify(ctx context.Context, m *Message) (bool, error) {
	r.mu.Lock()
	first := len(r.got) == 0
	r.got = append(r.got, m.ID)
	r.mu.Unlock()
	if first {
		close(r.started)
		select {
		case <-r.release:
		case <-ctx.Done():
			return true, ctx.Err()
		}
	}
	return false, nil
}

// A receiver that is down for long fills its queue: what it keeps and
// what it delivers first once back must be the pages. The queue delivers
// the most urgent tier first (a group's earlier messages before its later
// one, so a receiver never hears a group's older news last), and a full
// queue takes a P0 in place of its newest P2, which OnDrop reports, and
// refuses a P2 when it holds nothing less urgent.
func TestFullQueueKeepsP0PagesAndDeliversTheMostUrgentFirst(t *testing.T) {
	msg := func(id, group string, sev alerts.Severity) *Message {
		return &Message{ID: id, Kind: KindNotify, Receiver: "r", GroupKey: group, Severity: sev}
	}
	met := NewMetrics(nil)
	var dropped []string
	var mu sync.Mutex
	r := &recorder{started: make(chan struct{}), release: make(chan struct{})}
	q := NewQueue("r", r, QueueOptions{Capacity: 3, Metrics: met, OnDrop: func(m *Message) {
		mu.Lock()
		dropped = append(dropped, m.ID)
		mu.Unlock()
	}})
	defer q.Close()
	if !q.Enqueue(msg("busy", "a", alerts.P2)) {
		t.Fatal("refused")
	}
	<-r.started
	// A P0 of group x after x's P2: x's P2 goes first, so that the
	// messages of one group keep their order, then the P0, then other P2s.
	for _, m := range []*Message{msg("p2-x", "x", alerts.P2), msg("p2-b", "b", alerts.P2), msg("p0-x", "x", alerts.P0)} {
		if !q.Enqueue(m) {
			t.Fatalf("%s refused", m.ID)
		}
	}
	// Full: a P0 takes the place of the newest P2.
	if !q.Enqueue(msg("p0-d", "d", alerts.P0)) {
		t.Fatal("P0 refused by a full queue holding P2")
	}
	// Full, with nothing less urgent: a P2 is refused.
	if q.Enqueue(msg("p2-e", "e", alerts.P2)) {
		t.Fatal("P2 accepted by a full queue")
	}
	close(r.release)
	if err := q.Idle(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"busy", "p2-x", "p0-x", "p0-d"}
	if !slices.Equal(r.got, want) {
		t.Fatalf("delivered %v, want %v", r.got, want)
	}
	if want := []string{"p2-b"}; !slices.Equal(dropped, want) {
		t.Fatalf("displaced %v, want %v", dropped, want)
	}
	if got := testutil.ToFloat64(met.dropped.WithLabelValues("r")); got != 2 {
		t.Fatalf("dropped counter %v, want 2", got)
	}
}

// partial delivers a message in parts: the first parts attempts of each
// message report progress (ErrPartial), the next one finishes it.
type partial struct {
	mu    sync.Mutex
	parts int
	calls map[string]int
	order []string // group keys, one per call
	// gate, when set, blocks the first call until closed; started is
	// closed when that call begins.
	gate, started chan struct{}
}

func (p *partial) Notify(_ context.Context, m *Message) (bool, error) {
	if g := p.gate; g != nil {
		p.gate = nil
		close(p.started)
		<-g
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[m.GroupKey]++
	p.order = append(p.order, m.GroupKey)
	if p.calls[m.GroupKey] <= p.parts {
		return true, fmt.Errorf("%w: some events left", ErrPartial)
	}
	return false, nil
}

// A large group that a receiver delivers in many parts gets through: an
// attempt that made progress does not count against MaxAttempts and waits
// for no back-off.
func TestPartialDeliveriesDoNotUseUpAttempts(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	m := NewMetrics(nil)
	results := make(chan error, 1)
	n := &partial{parts: 20, calls: map[string]int{}}
	q := NewQueue("pd", n, QueueOptions{Clock: f, Metrics: m, MaxAttempts: 3,
		OnResult: func(_ *Message, _ int, err error) { results <- err }})
	defer q.Close()
	q.Enqueue(&Message{GroupKey: "big", Severity: alerts.P2})
	if err := <-results; err != nil {
		t.Fatalf("a message delivered in 21 parts failed: %v", err)
	}
	if got := testutil.ToFloat64(m.attempts.WithLabelValues("pd", "partial")); got != 20 {
		t.Fatalf("partial attempts %v, want 20", got)
	}
}

// A message delivered in parts gives way to a more urgent one queued
// meanwhile, then goes on.
func TestPartialDeliveryGivesWayToAMoreUrgentMessage(t *testing.T) {
	gate := make(chan struct{})
	n := &partial{parts: 2, calls: map[string]int{}, gate: gate, started: make(chan struct{})}
	results := make(chan string, 2)
	q := NewQueue("pd", n, QueueOptions{Clock: clock.NewFake(time.Unix(0, 0)),
		OnResult: func(m *Message, _ int, err error) {
			if err != nil {
				t.Error(err)
			}
			results <- m.GroupKey
		}})
	defer q.Close()
	q.Enqueue(&Message{GroupKey: "p2-flood", Severity: alerts.P2})
	<-n.started
	q.Enqueue(&Message{GroupKey: "p0-page", Severity: alerts.P0})
	close(gate)
	if first, second := <-results, <-results; first != "p0-page" || second != "p2-flood" {
		t.Fatalf("delivered %s then %s, want the P0 page first", first, second)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if got := strings.Join(n.order, ","); got != "p2-flood,p0-page,p0-page,p0-page,p2-flood,p2-flood" {
		t.Fatalf("calls %s", got)
	}
}
