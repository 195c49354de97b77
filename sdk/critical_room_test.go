package governor_test

import (
	"context"
	"testing"
	"time"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/shed"
)

// TestCriticalRoomBesideTheLowerClasses: the critical class gets room
// beyond the limit for its measured concurrency only while the lower
// classes are admitted beside it. A window in which critical requests held
// every slot and the lower classes got at most a fifth of the admissions
// (they were shed but for a trickle, or sent nothing) leaves the critical
// ceiling at the limit: room grown from that measurement would only let
// critical queue behind itself, as behind a dependency slower than its
// arrivals. When the lower classes are admitted again, the room returns.
func TestCriticalRoomBesideTheLowerClasses(t *testing.T) {
	const limit = 10 // fixed; core may fill 9
	window := shed.DefaultReserveWindow
	for _, tt := range []struct {
		name    string
		served  int // core requests admitted in the first window, beside 10 critical ones
		extra   int // critical requests admitted beyond the limit in the next window
		comment string
	}{
		{"lower classes shed", 0, 0, "the ceiling stays at the limit"},
		{"a trickle of the lower classes", 2, 0, "2 of 12 admissions: the ceiling stays at the limit"},
		{"lower classes served", 3, shed.Margin(limit), "3 of 13 admissions: room for the measured 10 plus the margin"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, 1, ruleset(concRoute(limit, 0.1)))
			ctx := context.Background()
			admit := func(prio string) (governor.Permit, bool) {
				p, err := f.g.Admit(ctx, governor.Request{Path: "/", Priority: prio})
				return p, err == nil
			}
			fill := func() []governor.Permit { // critical requests until the first refusal
				var held []governor.Permit
				for {
					p, ok := admit("critical")
					if !ok {
						return held
					}
					held = append(held, p)
				}
			}
			for range tt.served {
				p, ok := admit("core")
				if !ok {
					t.Fatal("core refused on an idle route")
				}
				p.Release(time.Millisecond, governor.Success)
			}
			held := fill()
			if len(held) != limit {
				t.Fatalf("first window: critical held %d, want the limit %d (nothing measured yet)", len(held), limit)
			}
			if _, ok := admit("core"); ok {
				t.Fatal("core admitted at the limit")
			}
			f.clk.Advance(window) // the window with critical at 10 is complete
			more := fill()
			if len(more) != tt.extra {
				t.Fatalf("next window: %d more critical admitted beyond the limit, want %d (%s)", len(more), tt.extra, tt.comment)
			}
			held = append(held, more...)
			if tt.served > 0 {
				return
			}
			// Critical traffic eases; a core request is admitted again, and the
			// window after that makes room for critical's measured peak.
			for _, p := range held[5:] {
				p.Release(time.Millisecond, governor.Success)
			}
			held = held[:5]
			p, ok := admit("core")
			if !ok {
				t.Fatal("core refused below its ceiling")
			}
			p.Release(time.Millisecond, governor.Success)
			f.clk.Advance(window)
			if more := fill(); len(more) != limit+shed.Margin(limit)-5 {
				t.Fatalf("after a core admission: %d more critical admitted, want %d (room for the remembered peak of 10)",
					len(more), limit+shed.Margin(limit)-5)
			}
		})
	}
}
