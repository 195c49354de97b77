package breaker

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// TestConcurrentProbesNeverExceedTheConfiguredCount hammers a breaker from
// several goroutines while the clock moves, and checks that no half-open
// round ever admits more than HalfOpenProbes calls.
func TestConcurrentProbesNeverExceedTheConfiguredCount(t *testing.T) {
	const probes = 2
	clk := clock.NewFake(time.Time{})
	g := hammered(t, probes)
	var (
		mu      sync.Mutex
		granted = map[Ticket]int{}
		wg      sync.WaitGroup
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range 5000 {
				if i%10 == 0 {
					clk.Advance(100 * time.Microsecond) // the workers move the clock too
				}
				now := clk.Nanotime()
				tk, err := g.Allow(now)
				if err != nil {
					continue
				}
				if stateOf(uint64(tk)) == HalfOpen {
					mu.Lock()
					granted[tk]++
					mu.Unlock()
				}
				g.Record(tk, clk.Nanotime(), 0, rng.IntN(3) != 0) // two in three fail
			}
		}()
	}
	wg.Wait()
	if len(granted) < 5 {
		t.Fatalf("only %d half-open rounds", len(granted))
	}
	t.Logf("%d half-open rounds", len(granted))
	for tk, n := range granted {
		if n > probes {
			t.Fatalf("half-open generation %d admitted %d probes, want at most %d", tk>>2, n, probes)
		}
	}
}

// allowN calls Allow n times at now and returns the tickets it handed out.
func allowN(b *Breaker, now int64, n int) []Ticket {
	var out []Ticket
	for range n {
		if tk, err := b.Allow(now); err == nil {
			out = append(out, tk)
		}
	}
	return out
}

// wantProbes checks that the current half-open round handed out exactly
// probes of tickets and that no round handed out more.
func wantProbes(t *testing.T, b *Breaker, tickets []Ticket, probes int) {
	t.Helper()
	perRound := map[Ticket]int{}
	for _, tk := range tickets {
		if stateOf(uint64(tk)) == HalfOpen {
			perRound[tk]++
		}
	}
	for tk, n := range perRound {
		if n > probes {
			t.Errorf("generation %d admitted %d probes, want at most %d", tk>>2, n, probes)
		}
	}
	cur := Ticket(b.word.Load())
	if stateOf(uint64(cur)) != HalfOpen || perRound[cur] != probes {
		t.Errorf("current generation %d (%v) admitted %d probes, want %d (tickets %v)",
			cur>>2, stateOf(uint64(cur)), perRound[cur], probes, tickets)
	}
}

// expireRound lets the half-open round run out its window without reports,
// which reopens the breaker, and waits out the open period: the next Allow
// starts a fresh round.
func (r *rig) expireRound() {
	r.t.Helper()
	r.clk.Advance(10 * time.Second)
	if _, err := r.b.Allow(r.clk.Nanotime()); !errors.Is(err, ErrOpen) {
		r.t.Fatalf("Allow after a window without reports = %v, want ErrOpen", err)
	}
	r.wantState(Open)
	r.clk.Advance(time.Duration(r.b.OpenUntil() - r.clk.Nanotime()))
}

// TestFreshProbeRoundKeepsItsSlots covers the start of a probe round after
// one whose probes never reported. A call of the old round can read the old
// word and try for a slot while the fresh round's start is half done: its
// slots are reset but its word not yet stored. That call must not take a slot
// of the fresh round, or the round is left with fewer probes than it needs
// to decide and waits a whole window to expire.
func TestFreshProbeRoundKeepsItsSlots(t *testing.T) {
	for _, probes := range []int{1, 3} {
		t.Run(fmt.Sprint(probes, " probes"), func(t *testing.T) {
			c := cfg()
			c.HalfOpenProbes = probes
			r := newRig(t, c)
			r.halfOpen()
			first := allowN(r.b, r.clk.Nanotime(), probes)
			if len(first) != probes {
				t.Fatalf("first round admitted %d probes, want %d", len(first), probes)
			}
			r.expireRound()
			now := r.clk.Nanotime()
			r.b.beforePublish = func() {
				r.b.beforePublish = nil
				for range probes {
					if r.b.takeSlot(uint64(first[0]), now) == slotTaken {
						t.Error("a call of the expired round took a slot of the fresh one")
					}
				}
			}
			tickets := allowN(r.b, now, probes+2)
			wantProbes(t, r.b, tickets, probes)
			for _, tk := range tickets {
				r.b.Record(tk, now, 0, false)
			}
			r.wantState(Closed)
		})
	}
}

// TestCallOfAnEndedRoundTakesNoSlotOfTheNext covers a call that reads a
// half-open word and is descheduled before it takes a probe slot, while its
// round fails, the breaker reopens and a fresh round starts. When it resumes
// it must take a slot of the fresh round only as a call of that round, with
// that round's ticket, never a slot whose ticket Record would ignore.
func TestCallOfAnEndedRoundTakesNoSlotOfTheNext(t *testing.T) {
	for _, probes := range []int{2, 3} {
		t.Run(fmt.Sprint(probes, " probes"), func(t *testing.T) {
			c := cfg()
			c.HalfOpenProbes = probes
			r := newRig(t, c)
			r.halfOpen()
			paused := r.clk.Nanotime()
			var tickets []Ticket
			r.b.beforeSlot = func() {
				r.b.beforeSlot = nil
				for r.b.State(r.clk.Nanotime()) == HalfOpen {
					if !r.call(true, 0) { // the probes fail: reopen
						t.Fatal("probe refused")
					}
				}
				r.clk.Advance(2 * time.Second)
				tickets = append(tickets, allowN(r.b, r.clk.Nanotime(), 1)...) // starts the fresh round
			}
			tickets = append(tickets, allowN(r.b, paused, 1)...)
			tickets = append(tickets, allowN(r.b, r.clk.Nanotime(), probes+1)...)
			wantProbes(t, r.b, tickets, probes)
			for _, tk := range tickets {
				r.b.Record(tk, r.clk.Nanotime(), 0, false)
			}
			r.wantState(Closed)
		})
	}
}

// TestCallFindingAFullRoundRetriesWhenTheRoundEnds covers a call that finds
// every probe of its round out while the last probe reports and closes the
// breaker. The call must be admitted by the closed breaker, not refused on
// behalf of the round that just ended.
func TestCallFindingAFullRoundRetriesWhenTheRoundEnds(t *testing.T) {
	c := cfg()
	c.HalfOpenProbes = 1
	r := newRig(t, c)
	r.halfOpen()
	now := r.clk.Nanotime()
	probe, err := r.b.Allow(now)
	if err != nil {
		t.Fatal(err)
	}
	r.b.beforeSlot = func() {
		r.b.beforeSlot = nil
		r.b.Record(probe, now, 0, false)
	}
	tk, err := r.b.Allow(now)
	if err != nil {
		t.Fatalf("Allow after the round closed the breaker: %v", err)
	}
	if stateOf(uint64(tk)) != Closed {
		t.Fatalf("ticket state = %v, want closed", stateOf(uint64(tk)))
	}
	r.wantState(Closed)
}

// TestReleaseOfAnEndedRoundFreesNoSlotOfTheNext covers a probe released after
// its round ended: the round expired after a window without reports, the
// breaker reopened, a fresh round started and its only probe is out. The
// release, whether it runs while the fresh round's start is half done (its
// slots stored, its word not yet) or after, must not free the new round's slot, or the new round would hand
// out more probes than configured. Extra releases of a ticket never take a
// round's count below zero, which would borrow from the round number.
func TestReleaseOfAnEndedRoundFreesNoSlotOfTheNext(t *testing.T) {
	c := cfg()
	c.HalfOpenProbes = 1
	r := newRig(t, c)
	r.halfOpen()
	old, err := r.b.Allow(r.clk.Nanotime())
	if err != nil {
		t.Fatal(err)
	}
	r.expireRound()
	r.b.beforePublish = func() {
		r.b.beforePublish = nil
		r.b.Release(old)
	}
	cur, err := r.b.Allow(r.clk.Nanotime())
	if err != nil || cur == old || stateOf(uint64(cur)) != HalfOpen {
		t.Fatalf("Allow after the probe window = %v, %v; want a probe of a fresh round", cur, err)
	}
	r.b.Release(old)
	if _, err := r.b.Allow(r.clk.Nanotime()); !errors.Is(err, ErrOpen) {
		t.Fatalf("Allow with the fresh round's probe out = %v: a release of the old round freed its slot", err)
	}
	for range 3 {
		r.b.Release(cur)
	}
	if _, err := r.b.Allow(r.clk.Nanotime()); err != nil {
		t.Fatalf("Allow after the probe was released = %v", err)
	}
	if _, err := r.b.Allow(r.clk.Nanotime()); !errors.Is(err, ErrOpen) {
		t.Fatalf("second Allow = %v: extra releases handed out an extra probe", err)
	}
}

// TestConcurrentReleasesNeverHandOutMoreProbesThanConfigured hammers a
// breaker whose calls are recorded or released at random while the clock
// moves, and checks that no half-open round ever has more than
// HalfOpenProbes probes out (handed out and not released) at once.
func TestConcurrentReleasesNeverHandOutMoreProbesThanConfigured(t *testing.T) {
	const probes = 2
	clk := clock.NewFake(time.Time{})
	g := hammered(t, probes)
	var (
		mu       sync.Mutex
		out      = map[Ticket]int{} // per round: probes handed out, not released
		released int
		wg       sync.WaitGroup
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for i := range 5000 {
				if i%10 == 0 {
					clk.Advance(100 * time.Microsecond)
				}
				tk, err := g.Allow(clk.Nanotime())
				if err != nil {
					continue
				}
				probe := stateOf(uint64(tk)) == HalfOpen
				if probe {
					// Counted after the slot is taken and (below) before it
					// is given back: the count never exceeds the real one.
					mu.Lock()
					out[tk]++
					n := out[tk]
					mu.Unlock()
					if n > probes {
						t.Errorf("half-open generation %d has %d probes out, want at most %d", tk>>2, n, probes)
						return
					}
				}
				if rng.IntN(3) == 0 {
					if probe {
						mu.Lock()
						out[tk]--
						released++
						mu.Unlock()
					}
					g.Release(tk)
					continue
				}
				g.Record(tk, clk.Nanotime(), 0, rng.IntN(2) == 0) // one in two fail
			}
		}()
	}
	wg.Wait()
	if len(out) < 5 || released == 0 {
		t.Fatalf("%d half-open rounds, %d probes released: the test exercised too little", len(out), released)
	}
	t.Logf("%d half-open rounds, %d probes released", len(out), released)
}

// hammered returns a breaker for the concurrent tests: it opens after 5
// calls, for 1-4ms, with the given number of half-open probes.
func hammered(t *testing.T, probes int) Guard {
	t.Helper()
	g, err := New(rules.Breaker{MinCalls: 5, OpenBase: rules.Duration(time.Millisecond),
		OpenMax: rules.Duration(4 * time.Millisecond), HalfOpenProbes: probes, Window: rules.Duration(100 * time.Millisecond)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return g
}
