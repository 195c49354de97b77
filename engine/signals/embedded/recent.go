package embedded

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"

	"governor.dev/governor/engine/signals"
)

// recentSamples is how many of its newest samples the recent cache keeps
// per series: a rate window of up to recentSamples-1 scrape intervals (a 1m
// window at 15 s scrapes needs 5) is answered from it.
const recentSamples = 12

// recent keeps, for the metrics the signal reader reads itself
// (signals.SeriesMetrics), the newest committed samples of every series in
// the TSDB's selection order (by series reference), so SelectFloats and
// SelectLatest answer the reader's windows without the TSDB's postings,
// series lookups and chunk decoding: recording-rule-like bookkeeping at
// ingest for the queries of every evaluation cycle. A window it cannot
// vouch for (older than its samples, or than the head) is read from the
// TSDB as before.
type recent struct {
	// order makes the cache see the commits of a series in the order the
	// head did.
	order   sync.Mutex
	mu      sync.RWMutex
	metrics map[string]*recentMetric
	// maxT is the newest sample time committed; swept the time of the last
	// sweep of series without a sample since the head's start.
	maxT, swept int64
}

type recentMetric struct {
	series []*recentSeries // by ref, the TSDB's selection order
	byRef  map[storage.SeriesRef]*recentSeries
}

// recentSeries is one series' newest samples, oldest first in a ring.
type recentSeries struct {
	ref   storage.SeriesRef
	ls    labels.Labels
	ring  [recentSamples]recentSample
	start int // index of the oldest sample
	n     int
	// floor: every sample of the series with a time above it is in the
	// ring. It starts just below the first sample seen (samples before it,
	// from blocks persisted before the store opened, were not seen) and
	// rises with every sample pushed out.
	floor int64
}

type recentSample struct {
	t int64
	v float64
}

func newRecent() *recent {
	r := &recent{metrics: map[string]*recentMetric{}}
	for _, m := range signals.SeriesMetrics() {
		r.metrics[m] = &recentMetric{byRef: map[storage.SeriesRef]*recentSeries{}}
	}
	return r
}

// pending is a sample appended but not yet committed. invalid marks a
// sample the cache does not model (a native histogram, a start-time zero
// sample): its series is then never answered from the cache.
type pending struct {
	m       *recentMetric
	ref     storage.SeriesRef
	ls      labels.Labels
	t       int64
	v       float64
	invalid bool
}

func (r *recent) metric(ls labels.Labels) *recentMetric {
	return r.metrics[ls.Get(model.MetricNameLabel)]
}

// commit records the committed samples.
func (r *recent) commit(ps []pending, headMin int64) {
	if len(ps) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range ps {
		s := p.m.byRef[p.ref]
		if s == nil {
			s = &recentSeries{ref: p.ref, ls: p.ls, floor: p.t - 1}
			p.m.byRef[p.ref] = s
			i, _ := slices.BinarySearchFunc(p.m.series, p.ref, func(e *recentSeries, ref storage.SeriesRef) int {
				return cmp.Compare(e.ref, ref)
			})
			p.m.series = slices.Insert(p.m.series, i, s)
		}
		switch {
		case p.invalid:
			s.floor = math.MaxInt64
		case s.n > 0 && p.t <= s.ring[(s.start+s.n-1)%recentSamples].t:
			// Not after the newest: the head drops it too (in-order head;
			// a different value at the same time was refused by Append).
		case s.n == recentSamples:
			s.floor = max(s.floor, s.ring[s.start].t)
			s.ring[s.start] = recentSample{p.t, p.v}
			s.start = (s.start + 1) % recentSamples
		default:
			s.ring[(s.start+s.n)%recentSamples] = recentSample{p.t, p.v}
			s.n++
		}
		r.maxT = max(r.maxT, p.t)
	}
	// Forget, now and then, the series with no sample since the head's
	// start: the head forgets them too.
	if r.maxT-r.swept > 15*60*1000 {
		r.swept = r.maxT
		for _, m := range r.metrics {
			m.series = slices.DeleteFunc(m.series, func(s *recentSeries) bool {
				if s.n > 0 && s.ring[(s.start+s.n-1)%recentSamples].t >= headMin {
					return false
				}
				delete(m.byRef, s.ref)
				return true
			})
		}
	}
}

// lookup returns the cached series of the selector ms, in the TSDB's
// selection order, with the matchers other than the metric name; ok false
// when the selector names no cached metric.
func (r *recent) lookup(ms []*labels.Matcher) ([]*recentSeries, []*labels.Matcher, bool) {
	var (
		m    *recentMetric
		rest = make([]*labels.Matcher, 0, len(ms))
	)
	for _, mt := range ms {
		if mt.Name == model.MetricNameLabel && mt.Type == labels.MatchEqual && m == nil {
			if m = r.metrics[mt.Value]; m == nil {
				return nil, nil, false
			}
			continue
		}
		rest = append(rest, mt)
	}
	if m == nil {
		return nil, nil, false
	}
	return m.series, rest, true
}

func matches(ls labels.Labels, ms []*labels.Matcher) bool {
	for _, m := range ms {
		if !m.Matches(ls.Get(m.Name)) {
			return false
		}
	}
	return true
}

// floats appends to pts the samples of s in (mint, maxt], stale markers
// dropped; ok false when the ring cannot vouch for the whole range.
func (s *recentSeries) floats(mint, maxt int64, pts []promql.FPoint) ([]promql.FPoint, bool) {
	if mint < s.floor {
		return pts, false
	}
	for i := range s.n {
		p := s.ring[(s.start+i)%recentSamples]
		if p.t > mint && p.t <= maxt && !value.IsStaleNaN(p.v) {
			pts = append(pts, promql.FPoint{T: p.t, F: p.v})
		}
	}
	return pts, true
}

// latest is the newest sample in [mint, ts], stale or not, and whether
// there is one; ok false when the ring cannot tell.
func (s *recentSeries) latest(mint, ts int64) (p recentSample, found, ok bool) {
	for i := s.n - 1; i >= 0; i-- {
		q := s.ring[(s.start+i)%recentSamples]
		if q.t > ts {
			continue
		}
		if q.t > s.floor {
			// The newest at or before ts: every later one is in the ring.
			return q, q.t >= mint, true
		}
		break
	}
	// No sample in (floor, ts]; those at or below floor may be missing.
	return recentSample{}, false, s.floor < mint
}

// selectFloats hands fn the samples of every series ms match in (mint,
// maxt], as DB.SelectFloats; ok false when the cache cannot answer (a
// metric it does not keep, a range it cannot vouch for), fn not called.
func (r *recent) selectFloats(mint, maxt, headMin int64, ms []*labels.Matcher, fn func(labels.Labels, []promql.FPoint)) bool {
	if mint < headMin {
		return false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	all, rest, ok := r.lookup(ms)
	if !ok {
		return false
	}
	sel := make([]*recentSeries, 0, len(all))
	for _, s := range all {
		if !matches(s.ls, rest) {
			continue
		}
		if mint < s.floor {
			return false
		}
		sel = append(sel, s)
	}
	var pts []promql.FPoint
	for _, s := range sel {
		pts, _ = s.floats(mint, maxt, pts[:0])
		fn(s.ls, pts)
	}
	return true
}

// selectLatest hands fn the sample an instant selector at ts takes from
// every series ms match (none when it is a stale marker), as
// DB.SelectLatest; ok false when the cache cannot answer, fn not called.
func (r *recent) selectLatest(mint, ts, headMin int64, ms []*labels.Matcher, fn func(labels.Labels, int64, float64)) bool {
	if mint < headMin {
		return false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	all, rest, ok := r.lookup(ms)
	if !ok {
		return false
	}
	type hit struct {
		s *recentSeries
		p recentSample
	}
	hits := make([]hit, 0, len(all))
	for _, s := range all {
		if !matches(s.ls, rest) {
			continue
		}
		p, found, ok := s.latest(mint, ts)
		if !ok {
			return false
		}
		if found && !value.IsStaleNaN(p.v) {
			hits = append(hits, hit{s, p})
		}
	}
	for _, h := range hits {
		fn(h.s.ls, h.p.t, h.p.v)
	}
	return true
}

// recentAppender records what it appends to the cache on commit.
type recentAppender struct {
	storage.Appender
	r       *recent
	headMin func() int64
	closed  *atomic.Bool // the DB's
	limit   *seriesLimit // the DB's
	pending []pending
}

// pendingPool recycles the pending lists of finished appenders: a scrape
// appends hundreds of samples.
var pendingPool = sync.Pool{New: func() any { return new([]pending) }}

func (a *recentAppender) add(p pending) {
	if a.pending == nil {
		a.pending = (*pendingPool.Get().(*[]pending))[:0]
	}
	a.pending = append(a.pending, p)
}

// release returns the pending list to the pool.
func (a *recentAppender) release() {
	if a.pending == nil {
		return
	}
	clear(a.pending) // drop the label references
	ps := a.pending[:0]
	a.pending = nil
	pendingPool.Put(&ps)
}

func (a *recentAppender) Append(ref storage.SeriesRef, l labels.Labels, t int64, v float64) (storage.SeriesRef, error) {
	if ref == 0 {
		var err error
		if ref, err = a.limit.admit(a.Appender, l); err != nil {
			return 0, err
		}
	}
	ref, err := a.Appender.Append(ref, l, t, v)
	if err == nil {
		if m := a.r.metric(l); m != nil {
			a.add(pending{m: m, ref: ref, ls: l, t: t, v: v})
		}
	}
	return ref, err
}

// invalidate marks the series of l as not answerable from the cache.
func (a *recentAppender) invalidate(ref storage.SeriesRef, l labels.Labels, err error) {
	if m := a.r.metric(l); m != nil && err == nil {
		a.add(pending{m: m, ref: ref, ls: l, invalid: true})
	}
}

func (a *recentAppender) AppendHistogram(ref storage.SeriesRef, l labels.Labels, t int64, h *histogram.Histogram, fh *histogram.FloatHistogram) (storage.SeriesRef, error) {
	ref, err := a.Appender.AppendHistogram(ref, l, t, h, fh)
	a.invalidate(ref, l, err)
	return ref, err
}

func (a *recentAppender) AppendHistogramSTZeroSample(ref storage.SeriesRef, l labels.Labels, t, st int64, h *histogram.Histogram, fh *histogram.FloatHistogram) (storage.SeriesRef, error) {
	ref, err := a.Appender.AppendHistogramSTZeroSample(ref, l, t, st, h, fh)
	a.invalidate(ref, l, err)
	return ref, err
}

func (a *recentAppender) AppendSTZeroSample(ref storage.SeriesRef, l labels.Labels, t, st int64) (storage.SeriesRef, error) {
	ref, err := a.Appender.AppendSTZeroSample(ref, l, t, st)
	a.invalidate(ref, l, err)
	return ref, err
}

func (a *recentAppender) AppendExemplar(ref storage.SeriesRef, l labels.Labels, e exemplar.Exemplar) (storage.SeriesRef, error) {
	return a.Appender.AppendExemplar(ref, l, e)
}

func (a *recentAppender) UpdateMetadata(ref storage.SeriesRef, l labels.Labels, m metadata.Metadata) (storage.SeriesRef, error) {
	return a.Appender.UpdateMetadata(ref, l, m)
}

func (a *recentAppender) Commit() error {
	if a.closed.Load() {
		a.release()
		_ = a.Appender.Rollback()
		return ErrClosed
	}
	if len(a.pending) == 0 {
		return a.Appender.Commit()
	}
	a.r.order.Lock()
	defer a.r.order.Unlock()
	err := a.Appender.Commit()
	if err != nil {
		// What the head kept is unknown: vouch for none of it.
		for i := range a.pending {
			a.pending[i].invalid = true
		}
	}
	a.r.commit(a.pending, a.headMin())
	a.release()
	return err
}

func (a *recentAppender) Rollback() error {
	a.release()
	return a.Appender.Rollback()
}
