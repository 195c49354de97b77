package recommend

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"governor.dev/governor/engine/pid"
	"governor.dev/governor/internal/statecodec"
)

// ErrState reports controller state that cannot be restored: truncated or
// corrupt bytes, another format version, a controller pid refuses, a
// ceiling (the base or the controller's output bounds) at or below 0.
// Returned errors wrap it and say what is wrong.
var ErrState = errors.New("recommend: cannot restore state")

// ControllersVersion is the format version of the bytes SaveControllers
// writes.
const ControllersVersion = 1

// Bounds of decoded controller state.
const (
	maxControllers     = 1 << 22
	maxServiceName     = 4096
	maxControllerBytes = 1 << 12
)

// SaveControllers encodes, in service order, what the recommender keeps
// of each service from one evaluation to the next besides its baseline
// (SaveBaselines): the count of consecutive known load scores and the
// ceiling controller (engine/pid) with the active version it tracks and
// the ceiling it started from. It appends to b and returns the result. A few hundred bytes a service:
// small enough for the engine to save it every cycle, so a replica that
// restores it (RestoreControllers) recommends exactly what this one would.
func (r *Recommender) SaveControllers(b []byte) ([]byte, error) {
	r.mu.Lock()
	names := make([]string, 0, len(r.s))
	for svc := range r.s {
		names = append(names, svc)
	}
	r.mu.Unlock()
	sort.Strings(names)
	e := statecodec.Enc{B: append(b, ControllersVersion)}
	e.U(uint64(len(names)))
	var ctl []byte
	for _, svc := range names {
		st := r.state(svc)
		st.mu.Lock()
		known, version, base, has := st.known, st.version, st.base, st.ctl != nil
		var err error
		if has {
			ctl, err = st.ctl.AppendBinary(ctl[:0])
		}
		st.mu.Unlock()
		if err != nil {
			return b, fmt.Errorf("recommend: %s: controller: %w", svc, err)
		}
		e.S(svc)
		e.U(uint64(known))
		e.Bool(has)
		if has {
			e.I(version)
			e.F(base)
			e.U(uint64(len(ctl)))
			e.B = append(e.B, ctl...)
		}
	}
	return e.B, nil
}

// controlState is one service's decoded controller state.
type controlState struct {
	known   int
	ctl     *pid.Controller
	version int64
	base    float64
}

// RestoreControllers replaces what the recommender keeps of every service
// between evaluations, baselines aside, by what SaveControllers encoded
// (another replica's, say): the services in data continue exactly where
// the encoding replica was, the others start afresh (no known scores, no
// controller), as they had there. State that cannot be restored is
// refused with an error wrapping ErrState and changes nothing.
func (r *Recommender) RestoreControllers(data []byte) error {
	d := statecodec.Dec{B: data, Sentinel: ErrState}
	switch {
	case len(data) == 0:
		d.Fail("empty")
		return d.Err
	case data[0] != ControllersVersion:
		d.Fail("format version %d, want %d", data[0], ControllersVersion)
		return d.Err
	}
	d.B = data[1:]
	n := d.N("services", maxControllers)
	got := make(map[string]controlState, min(n, len(d.B)/4))
	for range n {
		svc := d.S("service", maxServiceName)
		cs := controlState{known: int(min(d.U("known scores"), math.MaxInt32))}
		if d.Bool("has a controller") {
			cs.version, cs.base = d.I("version"), d.F("base ceiling")
			size := d.N("controller length", maxControllerBytes)
			if d.Err == nil && len(d.B) < size {
				d.Fail("controller of %q: truncated", svc)
			}
			if d.Err != nil {
				break
			}
			if !(cs.base > 0) {
				d.Fail("base ceiling of %q: %v req/s, want above 0", svc, cs.base)
				break
			}
			ctl, err := pid.RestoreController(d.B[:size])
			if err != nil {
				d.Fail("controller of %q: %v", svc, err)
				break
			}
			// The controller's output is a ceiling: track never builds one
			// that may go to 0 or below, or that moves with the load.
			if cfg := ctl.Config(); !(cfg.OutMin > 0) || cfg.Kp < 0 || cfg.Ki < 0 || cfg.Kd < 0 {
				d.Fail("controller of %q: output bounds [%v, %v] and gains %v, %v, %v, want bounds above 0 and gains not negative",
					svc, cfg.OutMin, cfg.OutMax, cfg.Kp, cfg.Ki, cfg.Kd)
				break
			}
			d.B = d.B[size:]
			cs.ctl = ctl
		}
		if d.Err != nil {
			break
		}
		if _, dup := got[svc]; dup || svc == "" {
			d.Fail("service %q: empty or twice", svc)
			break
		}
		got[svc] = cs
	}
	if err := d.End(); err != nil {
		return err
	}
	r.mu.Lock()
	all := make([]*state, 0, len(r.s))
	apply := make([]controlState, 0, len(r.s))
	for svc, st := range r.s {
		all = append(all, st)
		apply = append(apply, got[svc])
		delete(got, svc)
	}
	for svc, cs := range got {
		if cs.ctl == nil && cs.known == 0 {
			continue
		}
		st := r.newState()
		r.s[svc] = st
		all = append(all, st)
		apply = append(apply, cs)
	}
	r.mu.Unlock()
	for i, st := range all {
		cs := apply[i]
		st.mu.Lock()
		st.known, st.ctl, st.version, st.base = cs.known, cs.ctl, cs.version, cs.base
		st.mu.Unlock()
	}
	return nil
}
