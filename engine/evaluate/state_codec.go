package evaluate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/engine/thresholds"
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

type stateEnc struct{ b []byte }

func (e *stateEnc) u(v uint64)  { e.b = binary.AppendUvarint(e.b, v) }
func (e *stateEnc) i(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *stateEnc) f(v float64) { e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(v)) }
func (e *stateEnc) s(v string)  { e.u(uint64(len(v))); e.b = append(e.b, v...) }
func (e *stateEnc) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

type stateDec struct {
	b   []byte
	err error
}

func (d *stateDec) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrState, fmt.Sprintf(format, args...))
	}
}

func (d *stateDec) u(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("%s: truncated", what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *stateDec) i(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("%s: truncated", what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// n reads a count in [0, limit].
func (d *stateDec) n(what string, limit int) int {
	v := d.u(what)
	if d.err == nil && v > uint64(limit) {
		d.fail("%s %d: want at most %d", what, v, limit)
		return 0
	}
	return int(v)
}

func (d *stateDec) f(what string) float64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.fail("%s: truncated", what)
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
	d.b = d.b[8:]
	if math.IsNaN(v) || math.IsInf(v, 0) {
		d.fail("%s: %v, want a finite number", what, v)
		return 0
	}
	return v
}

func (d *stateDec) s(what string) string {
	n := d.n(what+" length", maxStateString)
	if d.err != nil {
		return ""
	}
	if len(d.b) < n {
		d.fail("%s: truncated", what)
		return ""
	}
	v := string(d.b[:n])
	d.b = d.b[n:]
	return v
}

func (d *stateDec) bool(what string) bool {
	if d.err != nil {
		return false
	}
	if len(d.b) < 1 || d.b[0] > 1 {
		d.fail("%s: want 0 or 1", what)
		return false
	}
	v := d.b[0] == 1
	d.b = d.b[1:]
	return v
}

func (d *stateDec) version() {
	if d.err != nil {
		return
	}
	if len(d.b) < 1 {
		d.fail("empty")
		return
	}
	if d.b[0] != stateFormat {
		d.fail("format version %d, want %d", d.b[0], stateFormat)
		return
	}
	d.b = d.b[1:]
}

func (d *stateDec) end() error {
	if d.err == nil && len(d.b) > 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	return d.err
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
	e := stateEnc{b: []byte{stateFormat}}
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
	e.u(uint64(len(keys)))
	for _, k := range keys {
		e.s(k.service)
		e.s(k.signal)
		e.s(k.level)
		e.i(s.raised[k].UnixNano())
	}
	open := make([]string, 0, len(s.open))
	for k, ok := range s.open {
		if ok {
			open = append(open, k)
		}
	}
	slices.Sort(open)
	e.u(uint64(len(open)))
	for _, k := range open {
		e.s(k)
	}
	bad := make([]string, 0, len(s.bad))
	for k, st := range s.bad {
		if badState(st) {
			bad = append(bad, k)
		}
	}
	slices.Sort(bad)
	e.u(uint64(len(bad)))
	for _, k := range bad {
		e.s(k)
		e.s(string(s.bad[k]))
	}
	return e.b
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
	d := stateDec{b: b}
	d.version()
	s := eventState{raised: map[levelKey]time.Time{}, open: map[string]bool{}, bad: map[string]distribution.State{}}
	n := d.n("crossed levels", maxStateEntries)
	for range n {
		k := levelKey{service: d.s("service"), signal: d.s("signal"), level: d.s("level")}
		at := d.i("reported at")
		if d.err != nil {
			break
		}
		if k.service == "" || (k.signal != events.SignalLatencyP99 && k.signal != events.SignalErrorRatio) ||
			(k.level != events.LevelWarn && k.level != events.LevelCritical) {
			d.fail("crossed level %q %q %q: want a service, signal %s or %s, level %s or %s", k.service, k.signal, k.level,
				events.SignalLatencyP99, events.SignalErrorRatio, events.LevelWarn, events.LevelCritical)
			break
		}
		s.raised[k] = time.Unix(0, at).UTC()
	}
	n = d.n("open breakers", maxStateEntries)
	for range n {
		if k := d.s("breaker"); d.err == nil {
			s.open[k] = true
		}
	}
	n = d.n("instances in a bad state", maxStateEntries)
	for range n {
		k, st := d.s("instance"), distribution.State(d.s("instance state"))
		if d.err != nil {
			break
		}
		if !badState(st) {
			d.fail("instance %q state %q: want STALE or NACKED", k, st)
			break
		}
		s.bad[k] = st
	}
	return s, d.end()
}

// encodeDownstream writes the baseline of one service's calls to a
// downstream, its anomaly detector included.
func encodeDownstream(b *latencyBaseline) ([]byte, error) {
	e := stateEnc{b: []byte{stateFormat}}
	e.f(b.p99)
	e.i(int64(b.n))
	e.bool(b.slow)
	e.i(int64(b.slowFor))
	det, err := b.det.MarshalBinary()
	if err != nil {
		return nil, err
	}
	e.b = append(e.b, det...)
	return e.b, nil
}

// decodeDownstream reads what encodeDownstream wrote into a baseline whose
// detector has the options the evaluator uses.
func decodeDownstream(b []byte) (*latencyBaseline, error) {
	d := stateDec{b: b}
	d.version()
	lb := &latencyBaseline{p99: d.f("p99"), n: int(d.i("cycles")), slow: d.bool("slow"), slowFor: int(d.i("slow cycles"))}
	if d.err == nil && (lb.p99 < 0 || lb.n < 0 || lb.slowFor < 0 || lb.n > math.MaxInt32 || lb.slowFor > math.MaxInt32) {
		d.fail("p99 %v, cycles %d, slow cycles %d: want none negative", lb.p99, lb.n, lb.slowFor)
	}
	if d.err != nil {
		return nil, d.err
	}
	det, err := thresholds.RestoreDetector(thresholds.DefaultOptions(), d.b)
	if err != nil {
		return nil, fmt.Errorf("%w: detector: %w", ErrState, err)
	}
	lb.det = det
	return lb, nil
}
