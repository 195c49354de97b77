package evaluate

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
)

// cutShortSource answers db's queries until armed; armed, it answers the
// query containing keep, then cancels the cycle's context with cause, and
// every other query waits for the context to end and fails with its cause:
// a cycle whose deadline ends during the signal read.
type cutShortSource struct {
	db     *embedded.DB
	keep   string
	cause  error
	cancel atomic.Pointer[context.CancelCauseFunc]
	mu     sync.Mutex
}

func (s *cutShortSource) Query(ctx context.Context, q string, at time.Time) (*signals.Result, error) {
	cancel := s.cancel.Load()
	if cancel == nil {
		return s.db.Query(ctx, q, at)
	}
	if !strings.Contains(q, s.keep) {
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	res, err := s.db.Query(ctx, q, at)
	(*cancel)(s.cause)
	return res, err
}

func (s *cutShortSource) QueryRange(ctx context.Context, q string, r signals.Range) (*signals.Result, error) {
	return s.db.QueryRange(ctx, q, r)
}

// TestTickCutShortByItsDeadlineMovesNoState: the cycle's context ends
// (tick_timeout) after the first signal query answered, so the read comes
// back with the other signals unknown. Tick stops there with the context's
// cause: the load-score smoothing, the controllers and baselines, the
// published scores and the last tick stay as the previous cycle left them.
func TestTickCutShortByItsDeadlineMovesNoState(t *testing.T) {
	db, st := outageStore(t)
	cause := errors.New("tick_timeout 5s reached")
	src := &cutShortSource{db: db, keep: "governor_sdk_inflight", cause: cause}
	reader, err := signals.NewReader(src, signals.ReaderOptions{Concurrency: 64})
	if err != nil {
		t.Fatal(err)
	}
	f := newForgetEngine(t, reader, st, &MemState{}, 0)
	f.tick(t, 5*time.Minute)
	state := func() []byte {
		tr, err := f.e.o.Tracker.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		ctl, err := f.rec.SaveControllers(nil)
		if err != nil {
			t.Fatal(err)
		}
		var base []byte
		if err := f.rec.SaveBaselines(func(string) bool { return true }, func(svc string, b []byte) {
			base = append(append(base, svc...), b...)
		}); err != nil {
			t.Fatal(err)
		}
		return bytes.Join([][]byte{tr, ctl, base}, []byte{0})
	}
	before, scores, last := state(), f.e.Scores(), f.e.LastTick()

	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	src.cancel.Store(&cancel)
	_, err = f.e.Tick(ctx, benchT0.Add(5*time.Minute+10*time.Second))
	if !errors.Is(err, cause) {
		t.Fatalf("Tick cut short by its deadline: error %v, want one naming %q", err, cause)
	}
	if !bytes.Equal(state(), before) {
		t.Fatal("Tick cut short by its deadline moved the load-score or recommender state")
	}
	if got := f.e.Scores(); len(got) != len(scores) || !got[0].At.Equal(scores[0].At) {
		t.Fatalf("Tick cut short by its deadline published scores %+v, want %+v", got, scores)
	}
	if !f.e.LastTick().Equal(last) {
		t.Fatalf("Tick cut short by its deadline is the last tick (%s), want %s", f.e.LastTick(), last)
	}
}
