// Package breaker protects a downstream from calls it cannot serve.
//
// Two kinds implement Guard, chosen by rules.Breaker.Kind:
//
//   - Breaker (kind "breaker"): a closed / open / half-open state machine.
//     While closed it counts calls, errors and slow calls over a sliding
//     window; once the window holds at least MinCalls calls and the error
//     ratio reaches ErrorRatio (or the slow-call ratio reaches SlowCallRatio)
//     it opens. It stays open for OpenBase, then lets HalfOpenProbes trial
//     calls through. The probes decide: it closes when they meet the ratios,
//     and reopens otherwise. A probe round whose calls have not all
//     reported back once its last probe has been out for a whole window (a
//     downstream that hangs) counts the missing ones as failed and ends on
//     that verdict, usually reopening with the next open period, so the
//     breaker cannot stay half-open while the downstream hangs. Should such
//     a probe succeed after all, the open period it caused ends at once and
//     the next call probes again.
//
//     The open period doubles with every opening up to OpenMax, and closing
//     does not forget it: the memory of openings halves for every OpenMax
//     the breaker then stays closed. A downstream that passes its probes and
//     fails again right after (a flapping one) is kept out longer each time,
//     as outlier ejection does; one that stays healthy long enough is back
//     at OpenBase. With OpenBase 5s and OpenMax 60s: 5s, 10s, 20s, 40s, 60s
//     while it flaps; after a minute closed the next opening lasts 40s,
//     after four minutes 5s.
//
//   - Throttle (kind "throttle"): client-side adaptive throttling from the
//     Google SRE book. It rejects a call locally with probability
//     max(0, (requests - K*accepts) / (requests + 1)) over the window, so a
//     struggling backend sees its load fall smoothly instead of all at once.
//
// The hot path takes the time as an argument (monotonic nanoseconds, as from
// clock.Clock.Nanotime) so a caller that already read the clock does not pay
// for a second read. Allow returns a Ticket that Record hands back, so a call
// started before a state change cannot decide the new state. A call that ends
// without an outcome (its caller cancelled it, or it was never made) hands
// its Ticket to Release instead: it counts neither way, a half-open probe's
// slot goes back to its round at once (rather than when the round times out)
// and the throttle takes back the request it counted.
//
// State-change hooks run synchronously in the goroutine that caused the
// change (a call's Allow or Record), after every lock has been released.
// State only reads: it never changes the state nor runs a hook, so a metrics
// scrape that calls it runs none.
package breaker
