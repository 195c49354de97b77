// Package limit holds Governor's adaptive concurrency limits: how many
// requests a route (or a downstream) may have in flight at once.
//
// A Limiter is fed one sample per finished request through Observe (the
// caller's clock reading, the round-trip time, the in-flight count when the
// request was admitted and whether it failed from overload) and answers Limit,
// an atomic load. Observe is lock-free and allocation-free: it adds the sample
// to one of several cache-line-padded shards chosen with rand.Uint32, with a
// single atomic add (the count and the RTT sum share a word; a new in-flight
// maximum or a drop costs one more), and the first call that crosses the end
// of the current window closes it with a compare-and-swap and recomputes the
// limit. Limiters never read the clock themselves on the hot path: the window
// runs on the now that callers pass. A caller that has already sharded the
// request (the admission core) calls ObserveShard (HintedObserver) with its
// shard instead, which records the same sample without a second random pick.
//
// The caller owns the in-flight count: admit while in-flight is below Limit,
// and on completion call Observe with its own clock reading, the RTT and the
// in-flight count the request was admitted with (see the package example).
// Inspector.Snapshot shows the learned state; WithSnapshot carries it across
// a rule change.
//
// # Algorithms
//
// New builds the algorithm named by rules.Concurrency.Algorithm:
//
//   - "gradient" (the default): the limit follows the ratio between the
//     no-load round-trip time and the window's average round-trip time.
//     gradient = clamp(noLoad * (1 + Tolerance) / sample, 0.5, 2) and
//     limit' = limit * gradient + sqrt(limit * gradient), smoothed by half
//     toward that target, so every window moves the limit by a bounded step
//     and the square-root term keeps a little queue of headroom to discover
//     spare capacity. The latency tolerated, noLoad * (1 + Tolerance), is
//     capped once answers come late: 80% of the lowest average RTT of a
//     loaded window with drops (1% or more), but not below 1.1 x noLoad,
//     until the no-load RTT falls by a fifth. Behind a dependency whose
//     no-load RTT is most of the callers' deadline (1.2 s of 2 s) the
//     tolerance's queue would take the answers past the deadline, and the
//     drops alone would cut only once the queue is being wasted. A step is
//     the exception: a second slow window in a
//     row at 4x the no-load RTT or more, not recovering (at least 80% of
//     the previous window's RTT), halves the limit at once, so a latency
//     step halves it within a round trip plus two windows of its first slow
//     samples. A step of many times the no-load RTT can leave no request
//     finishing for longer than that: see stalls below.
//   - "little": Little's law, brpc style. The limit is the largest recent
//     throughput times the no-load latency, corrected by the queueing seen
//     now: target = maxThroughput * ((2 + Tolerance) * noLoad - sample). It is
//     enforced only while an overload signal is on: by default the queueing
//     signal (the window's latency above noLoad * (1 + Tolerance)), or any
//     func() bool given with WithOverloadSignal, such as CPUSignal.Overloaded
//     over a CPUSampler reading cgroup or /proc CPU usage. While it is not
//     engaged the limit is still learned in the background and Limit is only
//     a loose cap: twice the recent peak in-flight or twice the learned
//     limit, whichever is larger (up to Max), approached by doubling per
//     window, so a stall downstream cannot let an unbounded backlog in before
//     the signal engages. Engaged, it cuts like the gradient within a few
//     windows of a latency step, because the target falls with the measured
//     latency.
//   - "fixed": Limit is always Max; a baseline for comparisons.
//
// Defaults come from rules.Concurrency: Initial 20 (Max for fixed), Min 4,
// Max 1000, Tolerance 0.5, ProbeInterval 60s. Windows last 100 ms
// (WithWindow) and need at least 10 samples (WithMinSamples).
//
// # Guards against the known failure modes
//
//   - Min-RTT drift under sustained load: the no-load RTT falls at once when a
//     window is faster, but rises only through a probe. Every ProbeInterval
//     (jittered by ±25%, seeded from the clock or by WithSeed) the limiter lowers its limit by
//     25% per step while the latency keeps falling (the server is still
//     saturated then, so little throughput is lost), measuring each step from
//     1.5 RTTs after it so that requests admitted under the previous limit do
//     not blur it, and stops at the first step where the latency no longer
//     falls (or at Min). The fastest probe window becomes the no-load RTT and
//     the limit is restored, capped at the fastest window's limit x
//     (1 + Tolerance). It never pins the limit to a tiny value as Envoy does:
//     in the simulated tests a probe keeps about 85% of the server's
//     throughput for its few windows. A probe waits for a window where the
//     limit is in use and enforced, so it never raises the estimate from a
//     load the limit does not shape. The first probe comes about 3 s after
//     the start, so a service that starts under load, and so never sees a
//     fast window, learns its no-load RTT within seconds.
//   - A stale no-load RTT, in both directions: a window 20% faster than the
//     estimate (a slow period ended) schedules a probe one old RTT later,
//     once the requests admitted in the slow period have drained (while
//     they finish the latency falls whatever the limit, which a probe would
//     take for its own doing); until then the latency does not cut the
//     limit either (drops still do). As the slow requests thin out the
//     estimate falls in several steps, each against a shorter old RTT: the
//     wait is the longest of them. It also raises the limit to at least the recent
//     peak in flight: the slots the slow requests held now turn over many
//     times faster, and new requests take them as they free instead of
//     waiting for the in-flight count to fall below a limit learned at the
//     slow RTT. An episode of congestion in which halving the limit (or
//     holding it at Min) did not bring the latency down by a fifth (the
//     latency is a slower dependency, not this limiter's queue), judged on
//     requests admitted after the halving, triggers a probe at once. Then
//     the slower RTT is adopted within a few round trips and the limit climbs back to what the server can
//     take, instead of sitting at Min until the next interval. Only a probe
//     window that used its limit caps the restored limit (one that did not
//     says nothing about it).
//   - Stalls: when a dependency becomes many times slower, no request
//     finishes for a while, so Observe hears nothing, while the limit fills
//     and refuses. The admission core reports every refusal to Refused
//     (RefusalObserver); once no request has finished for the longest of a
//     window, 4 x the no-load RTT and the last window's average RTT past the
//     end of the current window and past the first refusal after it (a
//     burst that fills the limit after a quiet spell is not a stall),
//     Refused halves an enforced limit at once, one cut per stall (until a
//     request finishes again). During a probe
//     the silence must also last 4 x the probe's fastest window: a step
//     during a routine probe abandons the probe (its windows would measure
//     the stall, and could not close before the stuck requests answer) and
//     cuts as without it, while the gaps between the slow answers of a
//     probe that relearns a slow dependency's RTT do not count. The
//     requests admitted before the cut are the stall's: their
//     slow samples do not cut again, and the cut is judged like a halving
//     (if the requests admitted after it are no faster, the no-load RTT is
//     stale and is re-probed). A 40x latency step then halves the limit in
//     about 0.2 s instead of after its first slow samples (1.2 s at 30 ms ->
//     1200 ms); the gaps between the slow answers that follow are not new
//     stalls. A pause shorter than a window never counts.
//   - Collapse at low traffic: a window with fewer than MinSamples samples
//     makes no decision; it is extended, and after ten window lengths its
//     samples are discarded, the limit unchanged (unless the limit is in use:
//     then it is the limit that holds the throughput down, and the window
//     keeps extending until it can decide). A window whose average in-flight
//     (sum of RTTs / duration) is below half the limit, and which did not use
//     the limit, changes nothing either: noisy latency or a few timeouts at
//     low load cannot ratchet the limit down.
//   - Unbounded growth when latency is flat: the limit grows only when it is
//     used, that is when in-flight reached 80% of the limit during the
//     window; it settles at about 1.25 x the peak demand. A burst is not
//     demand: a window whose in-flight touched 80% of the limit once but
//     whose average in-flight stayed more than 3 square roots of the limit
//     below it (10 in flight under a limit of 36) grows it only if it filled
//     the published limit. Before, single bursts at 60% of a slow
//     database's 32 connections (10 in flight on average) grew the limit to
//     36-51, and when the database slowed 40x, 45-53 requests were in before
//     the stall cut, those past the 32 connections answering after 2.4 s.
//     The small limits of a saturated server (6-10, with 1-3 in flight) are
//     within the square-root room and grow on a burst as before: that growth
//     is their burst headroom.
//   - Oscillation: steps are bounded and smoothed, and a single slow window (a
//     GC pause, a stalled neighbour) does not cut the limit nor start a
//     probe: the next window must be slow too (drops cut at once). Only a
//     window with load (in use, or an average in-flight of half the limit)
//     counts as slow here, so a mildly slow quiet window before a pause does
//     not make the pause look like a second slow window. After a cut to 90%
//     or less (a halving, drops) the limit is not cut again until most of a
//     window was admitted under it (1.5 RTT): the samples still in flight
//     saw the old limit. Likewise a raise waits until most of a window was
//     admitted after the previous one: behind a dependency slower than a
//     window, raising on every window would act on latencies that cannot
//     show the last raise yet and overshoot by a round trip. Where the
//     round trip is longer than a window, the first window admitted after
//     a raise also judges it: if the latency rose by at least half the
//     raise's share while the completion rate did not, the raise only
//     made a queue (a dependency with a fixed pool of connections), and
//     the limit goes back to what the measured completions justify and
//     then grows by one per window for 20 windows, as after drops. After a
//     window with drops (1% or more of its requests) the limit is cut by the dropped share (at
//     least 10%, at most half) and then grows by at most 1 per window for 20
//     windows, so it does not saw back into the timeouts. Little's law stays
//     engaged while its limit is in use and for a hold time after the signal
//     was last on; a released limit doubles per window up to its loose cap
//     instead of jumping there; CPUSignal smooths the CPU with an EWMA and hysteresis
//     (on at 80%, off below 70%). So CPU jitter does not flap the limit.
//
// Package limittest has a deterministic simulated server that drives a
// Limiter in virtual time, for tests and the overload laboratory.
package limit
