package leader

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"governor.dev/governor/sdk/clock"
)

// The lease tests run on a fake clock: a check every second, a lease of
// three, so a database call is cut short after one second of fake time.
const (
	testCheck = time.Second
	testLease = 3 * time.Second
)

var leaseT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// traced is an elector whose steps the test follows (Postgres.trace).
type traced struct {
	*Postgres
	events chan string
}

// startTraced runs an elector on clk until the test ends, with the options
// edit changes. The server-side session timeout is off: the fake clock does
// not pace the real server.
func startTraced(t *testing.T, dsn, id string, clk clock.Clock, edit ...func(*PostgresOptions)) *traced {
	t.Helper()
	o := PostgresOptions{URL: dsn, Identity: id, RetryInterval: testCheck, CheckInterval: testCheck,
		Lease: testLease, SessionTimeout: -1, Clock: clk}
	for _, f := range edit {
		f(&o)
	}
	e, err := NewPostgres(o)
	if err != nil {
		t.Fatal(err)
	}
	tr := &traced{Postgres: e, events: make(chan string, 10000)}
	e.trace = func(ev string) { tr.events <- ev }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return tr
}

// next waits until the elector reports event, skipping the others.
func (e *traced) next(t *testing.T, event string) {
	t.Helper()
	for ev := range e.events {
		if ev == event {
			return
		}
	}
}

// lead advances clk a check at a time until e leads, which it must not do
// before one lease after it took the lock (at the clock's reading then).
func (e *traced) lead(t *testing.T, clk *clock.Fake) {
	t.Helper()
	locked := clk.Now()
	for {
		e.next(t, "wait")
		if e.IsLeader() {
			break
		}
		if clk.Now().Sub(locked) > testLease {
			t.Fatalf("not leading %v after taking the lock", clk.Now().Sub(locked))
		}
		clk.Advance(testCheck)
	}
	if got := clk.Now().Sub(locked); got != testLease {
		t.Fatalf("leads %v after taking the lock, want one lease (%v)", got, testLease)
	}
}

// TestHungClaimNeitherBlocksIsLeaderNorOutlivesItsDeadline: a claim whose
// INSERT hangs in the database (here on a table lock another session
// holds; a stalled server or network looks the same to the leader) must
// not stall IsLeader, which the alerts loop and status checks call, and
// must give up after a third of the lease: the leadership ends at once,
// IsLeader turns false and the contexts handed out for the lead end.
func TestHungClaimNeitherBlocksIsLeaderNorOutlivesItsDeadline(t *testing.T) {
	dsn := migrated(t)
	ctx := context.Background()
	clk := clock.NewFake(leaseT0)
	e := startTraced(t, dsn, "a", clk)
	e.lead(t, clk)
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "LOCK TABLE governor_engine_ticks IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	lctx, cancel := e.LeaderContext(ctx)
	defer cancel()
	claimed := make(chan error, 1)
	go func() { _, err := e.ClaimTick(lctx, clk.Now()); claimed <- err }()
	e.next(t, "call claim")
	if !e.IsLeader() || lctx.Err() != nil {
		t.Fatalf("leader %v, lead context %v while the claim is in flight", e.IsLeader(), lctx.Err())
	}
	clk.Advance(testLease / 3)
	if err := <-claimed; !errors.Is(err, errCallTimeout) {
		t.Fatalf("claim: %v, want a timeout", err)
	}
	if e.IsLeader() {
		t.Fatal("still leading after a claim found the connection dead")
	}
	<-lctx.Done()
	if cause := context.Cause(lctx); !errors.Is(cause, errCallTimeout) {
		t.Fatalf("lead context ended with %v", cause)
	}
	e.next(t, "lost")
}

// TestLeaderThatCannotRenewStopsLeadingWhenItsLeaseRunsOut: the network
// to the database is cut, so the leader's checks get no answer. It leads
// until the lease it last confirmed runs out, measured on its own clock,
// and not a nanosecond longer, whatever its checks are doing; then the
// lead contexts end.
func TestLeaderThatCannotRenewStopsLeadingWhenItsLeaseRunsOut(t *testing.T) {
	dsn := migrated(t)
	px := newPartition(t, dsn)
	defer px.close()
	clk := clock.NewFake(leaseT0)
	e := startTraced(t, px.url, "a", clk)
	e.lead(t, clk) // the check that made it lead was sent now
	lctx, cancel := e.LeaderContext(context.Background())
	defer cancel()
	px.cut()
	clk.Advance(testLease - 1)
	if !e.IsLeader() || lctx.Err() != nil {
		t.Fatalf("leader %v, lead context %v before the lease ran out", e.IsLeader(), lctx.Err())
	}
	clk.Advance(1)
	if e.IsLeader() {
		t.Fatal("still leading when the lease ran out")
	}
	clk.Advance(testLease / 3) // the unanswered check's deadline
	// A check whose goroutine only got to send it after the clock last
	// moved (a busy machine) has its deadline later still: move the clock
	// on by a third of the lease at a time until the lead context ends.
	for i := 0; ; i++ {
		select {
		case <-lctx.Done():
		case <-time.After(20 * time.Millisecond):
			if i == 500 {
				t.Fatal("the lead context did not end after the lease ran out")
			}
			clk.Advance(testLease / 3)
			continue
		}
		break
	}
	e.next(t, "lost")
}

// TestStandbyWaitsOutTheLeaseOfTheLeaderBeforeIt: the leader is cut off
// from the database, whose server then ends its session (an operator, a
// timeout): the lock is free while the old leader still believes in its
// lease. The standby takes the lock but leads only one lease later, after
// the old leader's lease ran out: at no step do both lead.
func TestStandbyWaitsOutTheLeaseOfTheLeaderBeforeIt(t *testing.T) {
	dsn := migrated(t)
	ctx := context.Background()
	px := newPartition(t, dsn)
	defer px.close()
	clk := clock.NewFake(leaseT0)
	a := startTraced(t, px.url, "a", clk)
	a.lead(t, clk)
	b := startTraced(t, dsn, "b", clk)
	b.next(t, "campaign") // the lock is a's
	px.cut()
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	// Only this test's database: another package's test may hold the same
	// key in its own database at the same time.
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objid = $1
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
		uint32(DefaultLockKey&0xffffffff)); err != nil {
		t.Fatal(err)
	}
	oldLeaseEnds := clk.Now().Add(testLease)
	clk.Advance(testCheck) // a checks in vain; b retries and takes the lock
	a.next(t, "call check")
	b.next(t, "wait")
	bLeads := clk.Now().Add(testLease)
	if bLeads.Before(oldLeaseEnds) {
		t.Fatalf("b may lead at %v, before a's lease ends at %v", bLeads, oldLeaseEnds)
	}
	for clk.Now().Before(bLeads) {
		if a.IsLeader() && b.IsLeader() {
			t.Fatalf("two leaders at %v", clk.Now())
		}
		if b.IsLeader() {
			t.Fatalf("b leads at %v, before one lease after taking the lock", clk.Now())
		}
		clk.Advance(testCheck)
		b.next(t, "wait")
	}
	if !b.IsLeader() || a.IsLeader() {
		t.Fatalf("at %v: a leads %v, b leads %v; want b alone", clk.Now(), a.IsLeader(), b.IsLeader())
	}
}

// TestClaimTickOnlyMovesForward: a tick no later than the newest one
// claimed is not won, so a leader whose clock lags its predecessor's does
// not evaluate a cycle older than one already evaluated.
func TestClaimTickOnlyMovesForward(t *testing.T) {
	dsn := migrated(t)
	clk := clock.NewFake(leaseT0)
	e := startTraced(t, dsn, "a", clk)
	e.lead(t, clk)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, c := range []struct {
		tick time.Time
		won  bool
	}{{t0, true}, {t0, false}, {t0.Add(-time.Second), false}, {t0.Add(time.Second), true}} {
		won, err := e.ClaimTick(ctx, c.tick)
		if err != nil || won != c.won {
			t.Fatalf("claim %d (%v): %v %v, want %v", i, c.tick, won, err, c.won)
		}
	}
}

// termElector leads until the test ends its term.
type termElector struct {
	Local
	mu   sync.Mutex
	ends []context.CancelCauseFunc
}

func (e *termElector) LeaderContext(ctx context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancelCause(ctx)
	e.mu.Lock()
	e.ends = append(e.ends, cancel)
	e.mu.Unlock()
	return c, func() { cancel(context.Canceled) }
}

func (e *termElector) end(cause error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, f := range e.ends {
		f(cause)
	}
}

// armedClock reports every timer it arms.
type armedClock struct {
	*clock.Fake
	armed chan struct{}
}

func (c armedClock) NewTimer(d time.Duration) clock.Timer {
	t := c.Fake.NewTimer(d)
	c.armed <- struct{}{}
	return t
}

// TestTickEndsWithTheLead: a tick's work runs under the lead context, so
// when the lead is lost mid-tick (the lease ran out) what is left of the
// tick (proposals, the state saved) fails instead of running beside the
// next leader's.
func TestTickEndsWithTheLead(t *testing.T) {
	e := &termElector{Local: Local{ID: "a"}}
	clk := armedClock{Fake: clock.NewFake(time.Unix(1000, 0)), armed: make(chan struct{}, 10)}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan context.Context)
	release := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunTicks(ctx, e, clk, 10*time.Second, func(ctx context.Context, _ time.Time) {
			started <- ctx
			<-release
		})
	}()
	<-clk.armed
	clk.Advance(10 * time.Second)
	tctx := <-started
	if tctx.Err() != nil {
		t.Fatalf("tick context ended at the start: %v", tctx.Err())
	}
	e.end(ErrLeaseExpired)
	if !errors.Is(context.Cause(tctx), ErrLeaseExpired) {
		t.Fatalf("tick context after the lead ended: %v", context.Cause(tctx))
	}
	close(release)
	cancel()
	<-done
}

// partition is a TCP proxy to the test database that can cut the network:
// once cut, nothing passes either way and nothing is closed, as when a
// partition leaves both ends waiting.
type partition struct {
	url string
	ln  net.Listener

	mu     sync.Mutex
	cond   *sync.Cond
	isCut  bool
	closed bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newPartition(t *testing.T, dsn string) *partition {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	u.Host = ln.Addr().String()
	p := &partition{url: u.String(), ln: ln}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			if p.closed {
				p.mu.Unlock()
				c.Close()
				s.Close()
				return
			}
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			p.wg.Go(func() { p.pipe(s, c) })
			p.wg.Go(func() { p.pipe(c, s) })
		}
	})
	return p
}

// pipe copies src to dst while the network is whole.
func (p *partition) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		for p.isCut && !p.closed {
			p.cond.Wait()
		}
		closed := p.closed
		p.mu.Unlock()
		if closed {
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				dst.Close()
				return
			}
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			return
		}
	}
}

func (p *partition) cut() {
	p.mu.Lock()
	p.isCut = true
	p.mu.Unlock()
}

// close closes every connection and stops the proxy.
func (p *partition) close() {
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

// TestReplicaWithClockAheadClaimsNoTickTheOthersCannotReach: ticks are
// named by the replicas' wall clocks and only move forward, so a tick
// claimed by a replica whose clock runs an hour ahead would keep every
// replica with a correct clock from claiming (and from saving its state)
// for an hour. Such a claim fails with ErrClockSkew, naming the skew, and
// the replicas with correct clocks go on claiming; a MaxClockSkew larger
// than the skew, or negative, lets it through.
func TestReplicaWithClockAheadClaimsNoTickTheOthersCannotReach(t *testing.T) {
	dsn := migrated(t)
	ctx := context.Background()
	const interval = 15 * time.Second
	ahead := clock.NewFake(time.Now().Add(time.Hour))
	a := startTraced(t, dsn, "a", ahead)
	a.lead(t, ahead)
	won, err := a.ClaimTick(ctx, ahead.Now().Truncate(interval))
	if won || !errors.Is(err, ErrClockSkew) || !strings.Contains(err.Error(), "ahead of the database clock") {
		t.Fatalf("claim of a replica an hour ahead: won %v, err %v; want ErrClockSkew", won, err)
	}
	// The replicas share the tick table, whatever lock they lead by.
	right := clock.NewFake(time.Now())
	b := startTraced(t, dsn, "b", right, func(o *PostgresOptions) { o.LockKey = DefaultLockKey + 1 })
	b.lead(t, right)
	if won, err := b.ClaimTick(ctx, right.Now().Truncate(interval)); !won || err != nil {
		t.Fatalf("claim with a correct clock: won %v, err %v; want it won", won, err)
	}
	for i, skew := range []time.Duration{2 * time.Hour, -1} {
		c := startTraced(t, dsn, "c", ahead, func(o *PostgresOptions) { o.LockKey = DefaultLockKey + 2 + int64(i); o.MaxClockSkew = skew })
		c.lead(t, ahead)
		won, err := c.ClaimTick(ctx, ahead.Now().Truncate(interval).Add(time.Duration(i+1)*interval))
		if !won || err != nil {
			t.Fatalf("MaxClockSkew %v: claim an hour ahead: won %v, err %v; want it won", skew, won, err)
		}
	}
}

// timedClock remembers the duration of the timer armed last.
type timedClock struct {
	*clock.Fake
	last atomic.Int64
}

func (c *timedClock) NewTimer(d time.Duration) clock.Timer {
	c.last.Store(int64(d))
	return c.Fake.NewTimer(d)
}

// TestSlowChecksOfAHealthyLeaderKeepItsLease: with a CheckInterval close to
// the Lease (2.5s of 3s, a valid setting) and checks that take 600ms (a
// busy database, well within their deadline of a third of the lease), a
// check sent a CheckInterval after the last one answered would find the
// lease already run out: the healthy leader gave the lock up, and IsLeader
// turned false while the lead contexts went on until that check. The
// leader checks early enough instead, and leads on.
func TestSlowChecksOfAHealthyLeaderKeepItsLease(t *testing.T) {
	dsn := migrated(t)
	clk := &timedClock{Fake: clock.NewFake(leaseT0)}
	const latency = 600 * time.Millisecond
	e, err := NewPostgres(PostgresOptions{URL: dsn, Identity: "a", RetryInterval: time.Second,
		CheckInterval: 2500 * time.Millisecond, Lease: 3 * time.Second, SessionTimeout: -1, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	type step struct {
		ev   string
		wait time.Duration // of a "wait": the timer of the next check
	}
	steps := make(chan step, 1000)
	e.trace = func(ev string) {
		switch ev {
		case "call check":
			clk.Advance(latency) // the check takes this long to answer
		case "wait": // the lead loop armed its timer just before
			steps <- step{ev, time.Duration(clk.last.Load())}
			return
		}
		steps <- step{ev: ev}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	defer func() { cancel(); <-done }()
	var lctx context.Context
	for end := leaseT0.Add(30 * time.Second); clk.Now().Before(end); {
		switch s := <-steps; s.ev {
		case "lost", "campaign":
			t.Fatalf("%s at +%v: a healthy leader gave the lock up", s.ev, clk.Now().Sub(leaseT0))
		case "lead":
			var stop context.CancelFunc
			lctx, stop = e.LeaderContext(context.Background())
			defer stop()
		case "wait":
			if lctx != nil && (!e.IsLeader() || lctx.Err() != nil) {
				t.Fatalf("at +%v: leader %v, lead context %v", clk.Now().Sub(leaseT0), e.IsLeader(), context.Cause(lctx))
			}
			clk.Advance(s.wait) // to the next check
		}
	}
	if lctx == nil {
		t.Fatal("never led")
	}
}

// TestReplicaWithClockBehindSaysWhyItClaimsNothing: a replica whose clock
// lags the one that claimed the newest tick by an hour would lead and claim
// nothing for an hour, each claim read as a tick another replica took, with
// nothing in the log. Its claims fail with ErrClockSkew instead, naming the
// newest tick and its claimant; ticks taken within MaxClockSkew (the one
// claimed, one claimed by a replica slightly ahead) are still just taken.
func TestReplicaWithClockBehindSaysWhyItClaimsNothing(t *testing.T) {
	dsn := migrated(t)
	ctx := context.Background()
	const interval = 15 * time.Second
	right := clock.NewFake(time.Now())
	a := startTraced(t, dsn, "a", right)
	a.lead(t, right)
	newest := right.Now().Truncate(interval)
	if won, err := a.ClaimTick(ctx, newest); !won || err != nil {
		t.Fatalf("claim with a correct clock: won %v, err %v", won, err)
	}
	behind := clock.NewFake(time.Now().Add(-time.Hour))
	b := startTraced(t, dsn, "b", behind, func(o *PostgresOptions) { o.LockKey = DefaultLockKey + 1 })
	b.lead(t, behind)
	won, err := b.ClaimTick(ctx, behind.Now().Truncate(interval))
	if won || !errors.Is(err, ErrClockSkew) || !strings.Contains(err.Error(), "behind the newest claimed tick") ||
		!strings.Contains(err.Error(), `by "a"`) {
		t.Fatalf("claim of a replica an hour behind: won %v, err %v; want ErrClockSkew naming the newest tick and its leader", won, err)
	}
	// The tick claimed already, or one MaxClockSkew before it: taken, no
	// error.
	for _, tick := range []time.Time{newest, newest.Add(-10 * time.Second)} {
		if won, err := b.ClaimTick(ctx, tick); won || err != nil {
			t.Fatalf("claim of %v: won %v, err %v; want it taken", tick, won, err)
		}
	}
	// Unchecked with a negative MaxClockSkew.
	c := startTraced(t, dsn, "c", behind, func(o *PostgresOptions) { o.LockKey = DefaultLockKey + 2; o.MaxClockSkew = -1 })
	c.lead(t, behind)
	if won, err := c.ClaimTick(ctx, behind.Now().Truncate(interval)); won || err != nil {
		t.Fatalf("MaxClockSkew -1: won %v, err %v; want it taken", won, err)
	}
}
