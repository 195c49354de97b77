// Package loadscore turns signals into one load score in [0, 1] per service
// and per instance, smoothed and with hysteresis, keeping each term's
// contribution so a person can see why a score is what it is.
//
// # Terms and normalisation
//
// Each term is a signal divided by its target and clamped to [0, 1]:
//
//	cpu      = CPU cores used / Targets.CPUCores
//	memory   = resident bytes / Targets.MemoryBytes
//	latency  = p99 latency / Targets.Latency
//	inflight = in-flight requests / current concurrency limit   (optional)
//	queue    = p99 queueing delay / Targets.QueueDelay          (optional)
//
// Default weights are 0.4 cpu, 0.3 memory, 0.3 latency; the optional terms
// have weight zero until configured. A service-level score uses the
// service's signals (average instance CPU and memory, service-wide latency
// quantiles, summed in-flight and limits) with the same targets.
//
// # Unknown terms
//
// A term whose signal is unknown (missing, NaN, stale, failed, or partial:
// read from a query that warned data may be missing; see package signals)
// is left out and its weight is redistributed proportionally over
// the known terms: score = Σ wᵢ·xᵢ / Σ wᵢ over known terms only, and each
// known term's effective weight is wᵢ / Σ wᵢ. If the known weight is less
// than MinKnownWeight (default 0.5) of the total configured weight, the
// score is unknown: with CPU alone known (0.4 of 1.0) nothing is claimed.
//
// # Smoothing and hysteresis
//
// The raw score is smoothed by an exponentially weighted moving average
// over time, not samples: after dt the old value keeps weight 2^(−dt/HalfLife),
// so irregular evaluation intervals are handled. The evaluation time is an
// argument (the snapshot's time), never read from a clock. A key becomes
// Overloaded when the smoothed score rises above ActAbove (0.8) and is
// released only when it falls below ReleaseBelow (0.5). An unknown score
// changes neither the average nor the state; after MaxGap without a known
// score the key's history is dropped and starts afresh, and a key absent
// from snapshots for longer than MaxGap is forgotten. A caller that knows
// a service is gone sooner (engine/evaluate, after its ForgetAfter) calls
// Tracker.Forget, which drops every key of the service at once: one that
// comes back starts afresh rather than with stale smoothing or an old
// Overloaded state. The Tracker's
// MarshalBinary and UnmarshalBinary carry this state (the smoothed score,
// when it was last known and seen, the hysteresis side) to another replica,
// which then scores the next snapshot exactly as the first would.
package loadscore
