package recommend

import (
	"fmt"
	"sort"

	"governor.dev/governor/engine/thresholds"
)

// SaveBaselines calls fn, in service order, with the encoded healthy
// baseline (thresholds.Recommender.MarshalBinary) of every service it
// selects; select nil means every service. Each service's state is encoded
// under its lock, fn runs outside it.
func (r *Recommender) SaveBaselines(selected func(service string) bool, fn func(service string, state []byte)) error {
	r.mu.Lock()
	names := make([]string, 0, len(r.s))
	for svc := range r.s {
		if selected == nil || selected(svc) {
			names = append(names, svc)
		}
	}
	r.mu.Unlock()
	sort.Strings(names)
	for _, svc := range names {
		st := r.state(svc)
		st.mu.Lock()
		b, err := st.thr.MarshalBinary()
		st.mu.Unlock()
		if err != nil {
			return fmt.Errorf("recommend: %s: baseline: %w", svc, err)
		}
		fn(svc, b)
	}
	return nil
}

// RestoreBaseline replaces a service's healthy baseline by data, one
// SaveBaselines encoded (another replica's, say). A state that cannot be
// restored (thresholds.ErrState: another format or other options) leaves
// the service's baseline as it was.
func (r *Recommender) RestoreBaseline(service string, data []byte) error {
	thr, err := thresholds.RestoreRecommender(r.o.Thresholds, data)
	if err != nil {
		return fmt.Errorf("recommend: %s: baseline: %w", service, err)
	}
	r.mu.Lock()
	st := r.s[service]
	if st == nil {
		r.s[service] = &state{thr: thr}
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	st.mu.Lock()
	st.thr = thr
	st.mu.Unlock()
	return nil
}
