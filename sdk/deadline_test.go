package governor_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

func deadlineRoute(factor float64, mode rules.Mode) *rules.Ruleset {
	r := route("api", "/")
	r.Mode = mode
	r.Concurrency = &rules.Concurrency{Max: 10, DeadlineFactor: factor}
	return ruleset(r)
}

func TestDeadlineRefusesExpiredAndUnmeetable(t *testing.T) {
	f := newFixture(t, 1, deadlineRoute(0, ""))
	f.lims.made[0].rtt.Store(int64(50 * time.Millisecond))
	now := f.clk.Now()
	cases := []struct {
		name     string
		deadline time.Time
		admitted bool
	}{
		{"none stated", time.Time{}, true},
		{"passed", now.Add(-time.Millisecond), false},
		{"exactly now", now, false},
		{"less than the recent latency", now.Add(49 * time.Millisecond), false},
		{"exactly the recent latency", now.Add(50 * time.Millisecond), true},
		{"plenty", now.Add(time.Second), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hold, err := f.g.Admit(context.Background(), governor.Request{Path: "/x"})
			if err != nil {
				t.Fatal(err)
			}
			defer hold.Release(time.Millisecond, governor.Success)
			p, err := f.g.Admit(context.Background(), governor.Request{Path: "/x", Deadline: c.deadline})
			if c.admitted {
				if err != nil || !p.Admitted() {
					t.Fatalf("Admit = %v, %v; want admitted", p.Admitted(), err)
				}
				p.Release(time.Millisecond, governor.Success)
				return
			}
			var rej *governor.Rejection
			if !errors.As(err, &rej) || rej.Reason != governor.ReasonDeadline || !errors.Is(err, governor.ErrDeadline) || !errors.Is(err, governor.ErrRejected) {
				t.Fatalf("Admit error = %v; want a deadline rejection", err)
			}
			if n := f.g.InFlight("api"); n != 1 {
				t.Fatalf("in flight %d after a refusal; want 1 (the held request)", n)
			}
		})
	}
}

func TestDeadlineFactorScalesTheNeededBudget(t *testing.T) {
	f := newFixture(t, 1, deadlineRoute(2, ""))
	f.lims.made[0].rtt.Store(int64(50 * time.Millisecond))
	hold, _ := f.g.Admit(context.Background(), governor.Request{Path: "/"})
	defer hold.Release(time.Millisecond, governor.Success)
	admit := func(left time.Duration) error {
		p, err := f.g.Admit(context.Background(), governor.Request{Path: "/", Deadline: f.clk.Now().Add(left)})
		p.Release(time.Millisecond, governor.Success)
		return err
	}
	if err := admit(99 * time.Millisecond); !errors.Is(err, governor.ErrDeadline) {
		t.Fatalf("99ms left with factor 2 x 50ms: %v; want ErrDeadline", err)
	}
	if err := admit(100 * time.Millisecond); err != nil {
		t.Fatalf("100ms left with factor 2 x 50ms: %v", err)
	}
	// The clock moves: the same absolute deadline no longer leaves enough.
	dl := f.clk.Now().Add(150 * time.Millisecond)
	if _, err := f.g.Admit(context.Background(), governor.Request{Path: "/", Deadline: dl}); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(60 * time.Millisecond)
	if _, err := f.g.Admit(context.Background(), governor.Request{Path: "/", Deadline: dl}); !errors.Is(err, governor.ErrDeadline) {
		t.Fatalf("90ms left after the clock moved: %v; want ErrDeadline", err)
	}
}

func TestDeadlineUnknownLatencyAndShadow(t *testing.T) {
	// Before the limiter has measured a window, only the expired are refused.
	f := newFixture(t, 1, deadlineRoute(0, ""))
	if _, err := f.g.Admit(context.Background(), governor.Request{Path: "/", Deadline: f.clk.Now().Add(time.Nanosecond)}); err != nil {
		t.Fatalf("no latency measured yet: %v", err)
	}
	// In shadow mode nothing is refused for its deadline.
	s := newFixture(t, 1, deadlineRoute(0, rules.ModeShadow))
	s.lims.made[0].rtt.Store(int64(time.Second))
	hold, _ := s.g.Admit(context.Background(), governor.Request{Path: "/"})
	defer hold.Release(time.Millisecond, governor.Success)
	if _, err := s.g.Admit(context.Background(), governor.Request{Path: "/", Deadline: s.clk.Now().Add(time.Millisecond)}); err != nil {
		t.Fatalf("shadow, unmeetable: %v", err)
	}
	if _, err := s.g.Admit(context.Background(), governor.Request{Path: "/", Deadline: s.clk.Now().Add(-time.Second)}); err != nil {
		t.Fatalf("shadow, expired: %v", err)
	}
	// A route without a concurrency limit refuses only the expired.
	n := newFixture(t, 1, ruleset(route("open", "/")))
	if _, err := n.g.Admit(context.Background(), governor.Request{Path: "/", Deadline: n.clk.Now().Add(time.Nanosecond)}); err != nil {
		t.Fatalf("no concurrency limit: %v", err)
	}
	if _, err := n.g.Admit(context.Background(), governor.Request{Path: "/", Deadline: n.clk.Now().Add(-time.Nanosecond)}); !errors.Is(err, governor.ErrDeadline) {
		t.Fatalf("no concurrency limit, expired: %v; want ErrDeadline", err)
	}
}

// An idle route admits a request its recent latency says cannot finish, so
// the latency is measured again; critical requests are judged only on the
// deadline itself.
func TestDeadlineIdleRouteAndCriticalAreAdmitted(t *testing.T) {
	f := newFixture(t, 1, deadlineRoute(0, ""))
	f.lims.made[0].rtt.Store(int64(time.Second))
	short := func() time.Time { return f.clk.Now().Add(100 * time.Millisecond) }
	first, err := f.g.Admit(context.Background(), governor.Request{Path: "/", Deadline: short()})
	if err != nil {
		t.Fatalf("idle route: %v; want admitted to re-measure", err)
	}
	if _, err := f.g.Admit(context.Background(), governor.Request{Path: "/", Deadline: short()}); !errors.Is(err, governor.ErrDeadline) {
		t.Fatalf("with one in flight: %v; want ErrDeadline", err)
	}
	crit, err := f.g.Admit(context.Background(), governor.Request{Path: "/", Priority: "critical", Deadline: short()})
	if err != nil {
		t.Fatalf("critical with 100ms left: %v; want admitted", err)
	}
	if _, err := f.g.Admit(context.Background(), governor.Request{Path: "/", Priority: "critical", Deadline: f.clk.Now()}); !errors.Is(err, governor.ErrDeadline) {
		t.Fatalf("critical, expired: %v; want ErrDeadline", err)
	}
	first.Release(time.Millisecond, governor.Success)
	crit.Release(time.Millisecond, governor.Success)
	if _, err := f.g.Admit(context.Background(), governor.Request{Path: "/", Deadline: short()}); err != nil {
		t.Fatalf("idle again: %v", err)
	}
}

func TestDeadlineFactorChangeKeepsTheLimiter(t *testing.T) {
	f := newFixture(t, 1, deadlineRoute(0, ""))
	if err := f.g.Apply(deadlineRoute(3, ""), 2); err != nil {
		t.Fatal(err)
	}
	if len(f.lims.made) != 1 {
		t.Fatalf("changing deadline_factor built %d limiters; want the learned one kept", len(f.lims.made))
	}
	f.lims.made[0].rtt.Store(int64(10 * time.Millisecond))
	hold, _ := f.g.Admit(context.Background(), governor.Request{Path: "/"})
	defer hold.Release(time.Millisecond, governor.Success)
	if _, err := f.g.Admit(context.Background(), governor.Request{Path: "/", Deadline: f.clk.Now().Add(29 * time.Millisecond)}); !errors.Is(err, governor.ErrDeadline) {
		t.Fatalf("factor 3 not in force after Apply: %v", err)
	}
}

func TestDeadlineFactorValidation(t *testing.T) {
	for _, v := range []float64{-1, 10.5} {
		err := deadlineRoute(v, "").Validate()
		if err == nil || !strings.Contains(err.Error(), "concurrency.deadline_factor") {
			t.Errorf("deadline_factor %v: %v; want an error naming the field", v, err)
		}
	}
	if err := deadlineRoute(0.01, "").Validate(); err != nil {
		t.Errorf("deadline_factor 0.01: %v", err)
	}
}

func TestDeadlineRefusalsCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	clk := clock.NewFake(fakeStart)
	opts := governor.DefaultOptions("svc")
	opts.Clock = clk
	opts.Registerer = reg
	opts.Defaults = deadlineRoute(0, "")
	g, err := governor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for range 3 {
		if _, err := g.Admit(context.Background(), governor.Request{Path: "/", Priority: "critical", Deadline: clk.Now().Add(-time.Second)}); !errors.Is(err, governor.ErrDeadline) {
			t.Fatal(err)
		}
	}
	m := gather(t, reg)
	if v := m.value("governor_sdk_requests_total", map[string]string{"route": "api", "class": "critical", "outcome": "deadline"}); v != 3 {
		t.Fatalf("deadline refusals counted %v; want 3", v)
	}
	if v := m.value("governor_sdk_requests_total", map[string]string{"route": "api", "class": "critical", "outcome": "queue_timeout"}); v != 0 {
		t.Fatalf("deadline refusals also counted as queue_timeout: %v", v)
	}
}
