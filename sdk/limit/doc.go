// Package limit holds Governor's adaptive concurrency limits: how many
// requests a route (or a downstream) may have in flight at once.
//
// A Limiter is fed one sample per finished request through Observe (the
// caller's clock reading, the round-trip time, the in-flight count when the
// request was admitted and whether it failed from overload) and answers Limit,
// an atomic load. Observe is lock-free and allocation-free: it adds the sample
// to one of several cache-line-padded shards of atomic counters chosen at
// random, and the first call that crosses the end of the current window
// closes it with a compare-and-swap and recomputes the limit. Limiters never
// read the clock themselves on the hot path.
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
//     spare capacity.
//   - "little": Little's law, brpc style. The limit is the largest recent
//     throughput times the no-load latency, corrected by the queueing seen
//     now: target = maxThroughput * ((2 + Tolerance) * noLoad - sample). It is
//     enforced only while an overload signal is on: by default the queueing
//     signal (the window's latency above noLoad * (1 + Tolerance)), or any
//     func() bool given with WithOverloadSignal, such as CPUSignal.Overloaded
//     over a CPUSampler reading cgroup or /proc CPU usage. Once engaged it
//     stays engaged for a hold time (1 s) after the signal was last seen,
//     so a jittery signal does not flap the limit. While it is not engaged
//     Limit returns Max and the limit is still learned in the background.
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
//     (jittered by ±25%) the limiter lowers its limit in steps of 25%, one
//     window each, until the latency stops falling (or it reaches Min, or four
//     steps), takes the fastest window of the probe as the new no-load RTT and
//     restores the limit. It never pins the limit to a tiny value as Envoy
//     does, so a probe costs a few hundred milliseconds of a slightly lower
//     limit, not a crater in success rate. When the limit is not in use the
//     probe only measures.
//   - Collapse at low traffic: a window with fewer than MinSamples samples
//     makes no decision; it is extended, and after ten window lengths its
//     samples are discarded, the limit unchanged.
//   - Unbounded growth when latency is flat: the limit grows only when it is
//     used, that is when at least a tenth of the window's requests were
//     admitted with in-flight at 80% of the limit or more.
//   - Oscillation from jitter: bounded and smoothed steps; Little's law
//     engages with a hold time, and CPUSignal adds an EWMA and hysteresis
//     (engage at 80%, release below 70%).
//   - Overload drops (timeouts, downstream rejections) cut the limit by the
//     share of dropped requests (at least 10%, at most half) when they reach
//     1% of a window.
//
// Package limittest has a deterministic simulated server that drives a
// Limiter in virtual time, for tests and the overload laboratory.
package limit
