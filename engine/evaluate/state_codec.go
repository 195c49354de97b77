package evaluate

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/engine/thresholds"
	"governor.dev/governor/internal/statecodec"
	"governor.dev/governor/rules/distribution"
)

// ErrState marks persisted engine state that cannot be restored: another
// format, truncated or corrupt bytes. Returned errors wrap it and say what
// is wrong.
var ErrState = errors.New("evaluate: cannot restore state")

// stateFormat is the format version of every row the engine writes to its
// state table; rows of another version are ignored at restore.
const stateFormat = 1

// maxStateString bounds a name (service, downstream, instance) in the
// encoded state.
const maxStateString = 4096

// stateEnc and stateDec are the shared state encoding (internal/statecodec)
// with this package's error and string bound.
type stateEnc struct{ statecodec.Enc }

type stateDec struct{ statecodec.Dec }

func newStateDec(b []byte) *stateDec { return &stateDec{statecodec.Dec{B: b, Sentinel: ErrState}} }

func (d *stateDec) s(what string) string { return d.S(what, maxStateString) }

func (d *stateDec) version() {
	if d.Err != nil {
		return
	}
	if len(d.B) < 1 {
		d.Fail("empty")
		return
	}
	if d.B[0] != stateFormat {
		d.Fail("format version %d, want %d", d.B[0], stateFormat)
		return
	}
	d.B = d.B[1:]
}

// eventState is what the evaluator remembers of what it reported, so a new
// leader neither reports it again nor misses its end: the alert levels
// crossed (and when last reported), the open breakers and the instances in
// a bad ledger state (STALE or NACKED).
type eventState struct {
	raised map[levelKey]time.Time
	open   map[string]bool
	bad    map[string]distribution.State
}

// encodeEvents writes an eventState in a deterministic order.
func encodeEvents(s eventState) []byte {
	e := stateEnc{statecodec.Enc{B: []byte{stateFormat}}}
	keys := make([]levelKey, 0, len(s.raised))
	for k := range s.raised {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b levelKey) int {
		if c := cmpStr(a.service, b.service); c != 0 {
			return c
		}
		if c := cmpStr(a.signal, b.signal); c != 0 {
			return c
		}
		return cmpStr(a.level, b.level)
	})
	e.U(uint64(len(keys)))
	for _, k := range keys {
		e.S(k.service)
		e.S(k.signal)
		e.S(k.level)
		e.I(s.raised[k].UnixNano())
	}
	open := make([]string, 0, len(s.open))
	for k, ok := range s.open {
		if ok {
			open = append(open, k)
		}
	}
	slices.Sort(open)
	e.U(uint64(len(open)))
	for _, k := range open {
		e.S(k)
	}
	bad := make([]string, 0, len(s.bad))
	for k, st := range s.bad {
		if badState(st) {
			bad = append(bad, k)
		}
	}
	slices.Sort(bad)
	e.U(uint64(len(bad)))
	for _, k := range bad {
		e.S(k)
		e.S(string(s.bad[k]))
	}
	return e.B
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// maxStateEntries bounds every list in an encoded eventState.
const maxStateEntries = 1 << 20

// decodeEvents reads what encodeEvents wrote.
func decodeEvents(b []byte) (eventState, error) {
	d := newStateDec(b)
	d.version()
	s := eventState{raised: map[levelKey]time.Time{}, open: map[string]bool{}, bad: map[string]distribution.State{}}
	n := d.N("crossed levels", maxStateEntries)
	for range n {
		k := levelKey{service: d.s("service"), signal: d.s("signal"), level: d.s("level")}
		at := d.I("reported at")
		if d.Err != nil {
			break
		}
		if k.service == "" || (k.signal != events.SignalLatencyP99 && k.signal != events.SignalErrorRatio) ||
			(k.level != events.LevelWarn && k.level != events.LevelCritical) {
			d.Fail("crossed level %q %q %q: want a service, signal %s or %s, level %s or %s", k.service, k.signal, k.level,
				events.SignalLatencyP99, events.SignalErrorRatio, events.LevelWarn, events.LevelCritical)
			break
		}
		s.raised[k] = time.Unix(0, at).UTC()
	}
	n = d.N("open breakers", maxStateEntries)
	for range n {
		if k := d.s("breaker"); d.Err == nil {
			s.open[k] = true
		}
	}
	n = d.N("instances in a bad state", maxStateEntries)
	for range n {
		k, st := d.s("instance"), distribution.State(d.s("instance state"))
		if d.Err != nil {
			break
		}
		if !badState(st) {
			d.Fail("instance %q state %q: want STALE or NACKED", k, st)
			break
		}
		s.bad[k] = st
	}
	return s, d.End()
}

// encodeDownstream writes the baseline of one service's calls to a
// downstream, its anomaly detector included.
func encodeDownstream(b *latencyBaseline) ([]byte, error) {
	e := stateEnc{statecodec.Enc{B: []byte{stateFormat}}}
	e.F(b.p99)
	e.I(int64(b.n))
	e.Bool(b.slow)
	e.I(int64(b.slowFor))
	det, err := b.det.MarshalBinary()
	if err != nil {
		return nil, err
	}
	e.B = append(e.B, det...)
	return e.B, nil
}

// decodeDownstream reads what encodeDownstream wrote into a baseline whose
// detector has the options the evaluator uses.
func decodeDownstream(b []byte) (*latencyBaseline, error) {
	d := newStateDec(b)
	d.version()
	lb := &latencyBaseline{p99: d.F("p99"), n: int(d.I("cycles")), slow: d.Bool("slow"), slowFor: int(d.I("slow cycles"))}
	if d.Err == nil && (lb.p99 < 0 || lb.n < 0 || lb.slowFor < 0 || lb.n > math.MaxInt32 || lb.slowFor > math.MaxInt32) {
		d.Fail("p99 %v, cycles %d, slow cycles %d: want none negative", lb.p99, lb.n, lb.slowFor)
	}
	if d.Err != nil {
		return nil, d.Err
	}
	det, err := thresholds.RestoreDetector(thresholds.DefaultOptions(), d.B)
	if err != nil {
		return nil, fmt.Errorf("%w: detector: %w", ErrState, err)
	}
	lb.det = det
	return lb, nil
}
