package versioning_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/internal/conformance"
	"governor.dev/governor/sdk/clock"
)

// advanceWhenRunWaits advances clk by d once Run waits on its timer: a
// clock advanced between Run's reading of it and its timer would leave the
// timer a whole interval out.
func advanceWhenRunWaits(clk *clock.Fake, d time.Duration) {
	for clk.Pending() == 0 {
		runtime.Gosched()
	}
	clk.Advance(d)
}

// runChecker runs c.Run until the test ends.
func runChecker(t *testing.T, c *versioning.AuditChecker) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { c.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// TestAuditCheckerRunFindsAnEditedOldEntryWithoutAView: Run walks the
// whole chain at start and WholeEvery after, with no check asking; the
// walk that finds an old entry edited reports it (OnWhole) and the next
// check reports it without reading the store.
func TestAuditCheckerRunFindsAnEditedOldEntryWithoutAView(t *testing.T) {
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) {
			ctx := context.Background()
			h := o.open(t)
			recordEntries(t, h.Store, 10)
			clk := clock.NewFake(time.Date(2026, 3, 1, 14, 2, 0, 0, time.UTC))
			walks := make(chan versioning.AuditWalk, 4)
			c := versioning.NewAuditChecker(h.Store, versioning.AuditCheckerOptions{WholeEvery: 10 * time.Minute, Clock: clk,
				OnWhole: func(w versioning.AuditWalk) { walks <- w }})
			runChecker(t, c)
			first := <-walks
			require.NoError(t, first.Err)
			require.True(t, first.Background)
			require.Equal(t, int64(10), first.Entries)

			require.NoError(t, h.Tamper(ctx, `UPDATE rule_audit SET actor = 'mallory' WHERE seq = 2`))
			advanceWhenRunWaits(clk, 10*time.Minute)
			second := <-walks
			require.True(t, second.Background)
			requireBrokenAt(t, second.Err, 2)
			require.Equal(t, 2, int(c.Status().Broken.(*versioning.ChainError).Seq))

			_, err := c.Check(ctx, false)
			requireBrokenAt(t, err, 2)
		})
	}
}

// gatedAuditor holds every whole walk until the test releases it.
type gatedAuditor struct {
	versioning.Auditor
	entered chan struct{}
	release chan struct{}
}

func (g *gatedAuditor) VerifyAudit(ctx context.Context) (versioning.AuditReport, error) {
	g.entered <- struct{}{}
	<-g.release
	return g.Auditor.VerifyAudit(ctx)
}

func (g *gatedAuditor) VerifyAuditFrom(ctx context.Context, from versioning.AuditReport) (versioning.AuditReport, error) {
	return g.Auditor.(versioning.AuditSpanVerifier).VerifyAuditFrom(ctx, from)
}

// TestAuditChecksDoNotWaitForARunningWholeWalk: while Run's whole walk
// runs, a check returns at once: before the first walk passed it says so
// (Pending, Running), after it verifies the new entries only; a check
// asking for the whole chain takes a walk that starts after it asked.
func TestAuditChecksDoNotWaitForARunningWholeWalk(t *testing.T) {
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) {
			ctx := context.Background()
			h := o.open(t)
			recordEntries(t, h.Store, 10)
			clk := clock.NewFake(time.Date(2026, 3, 1, 14, 2, 0, 0, time.UTC))
			g := &gatedAuditor{Auditor: h.Store, entered: make(chan struct{}), release: make(chan struct{})}
			walks := make(chan versioning.AuditWalk, 4)
			c := versioning.NewAuditChecker(g, versioning.AuditCheckerOptions{WholeEvery: 10 * time.Minute, Clock: clk,
				OnWhole: func(w versioning.AuditWalk) { walks <- w }})
			runChecker(t, c)

			<-g.entered // the first walk runs
			pending, err := c.Check(ctx, false)
			require.NoError(t, err)
			require.True(t, pending.Pending, "no whole walk has passed yet")
			require.True(t, pending.Running)
			require.True(t, clk.Now().Equal(pending.RunningSince))
			require.Zero(t, pending.Entries)
			g.release <- struct{}{}
			require.NoError(t, (<-walks).Err)

			recordEntries(t, h.Store, 3)
			advanceWhenRunWaits(clk, 10*time.Minute)
			<-g.entered // the second walk runs
			during, err := c.Check(ctx, false)
			require.NoError(t, err)
			require.False(t, during.Whole)
			require.False(t, during.Pending)
			require.True(t, during.Running)
			require.Equal(t, int64(13), during.Entries)
			require.Equal(t, int64(3), during.New)
			require.Equal(t, int64(10), during.WholeEntries)

			type result struct {
				rep versioning.AuditCheck
				err error
			}
			asked := make(chan result, 1)
			go func() {
				rep, err := c.Check(ctx, true)
				asked <- result{rep, err}
			}()
			g.release <- struct{}{} // the background walk ends; the request walks again
			require.NoError(t, (<-walks).Err)
			<-g.entered
			g.release <- struct{}{}
			require.NoError(t, (<-walks).Err)
			res := <-asked
			require.NoError(t, res.err)
			rep := res.rep
			require.True(t, rep.Whole)
			require.Equal(t, int64(13), rep.WholeEntries)
		})
	}
}

// TestAuditCheckerRunWalksOnTheInjectedClock: Run walks at start, then
// WholeEvery after the last whole walk ended, on the injected clock; a
// walk a check asked for moves the next one.
func TestAuditCheckerRunWalksOnTheInjectedClock(t *testing.T) {
	ctx := context.Background()
	h := sqliteHarness(t, conformance.Options{})
	recordEntries(t, h.Store, 3)
	start := time.Date(2026, 3, 1, 14, 2, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	walks := make(chan versioning.AuditWalk, 4)
	c := versioning.NewAuditChecker(h.Store, versioning.AuditCheckerOptions{WholeEvery: 10 * time.Minute, Clock: clk,
		OnWhole: func(w versioning.AuditWalk) { walks <- w }})
	runChecker(t, c)
	w := <-walks
	require.True(t, w.Background)
	require.True(t, start.Equal(w.Start))

	advanceWhenRunWaits(clk, 9*time.Minute)
	clk.Advance(time.Minute)
	w = <-walks
	require.True(t, w.Background)
	require.True(t, start.Add(10*time.Minute).Equal(w.Start), "walked at %v, want WholeEvery after the first", w.Start)

	advanceWhenRunWaits(clk, 5*time.Minute)
	rep, err := c.Check(ctx, true)
	require.NoError(t, err)
	require.True(t, rep.Whole)
	w = <-walks
	require.False(t, w.Background)
	require.True(t, start.Add(25*time.Minute).Equal(rep.NextWhole))

	// Past the walk that was due before the one asked for (at +20m), then
	// to the one now due: a Fake fires a timer at its own time, and Run,
	// woken then, times its next wait from there.
	advanceWhenRunWaits(clk, 5*time.Minute)
	advanceWhenRunWaits(clk, 5*time.Minute)
	w = <-walks
	require.True(t, w.Background)
	require.True(t, start.Add(25*time.Minute).Equal(w.Start), "walked at %v, want WholeEvery after the one asked for", w.Start)
	require.Empty(t, walks)
}
