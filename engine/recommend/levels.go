package recommend

import "governor.dev/governor/engine/thresholds"

// Thresholds returns what the service's healthy baselines recommend now
// (engine/thresholds: the breaker slow-call threshold and the p99 latency
// alert levels; Inconclusive until enough healthy intervals were seen). ok
// is false for a service never evaluated. The engine alerts on these
// levels (engine/evaluate AlertLevels).
func (r *Recommender) Thresholds(service string) (thresholds.Recommendation, bool) {
	r.mu.Lock()
	st := r.s[service]
	r.mu.Unlock()
	if st == nil {
		return thresholds.Recommendation{}, false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.thr.Recommend(), true
}
