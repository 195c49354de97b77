package embedded

import (
	"context"
	"fmt"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"governor.dev/governor/engine/signals"
)

var _ signals.SeriesSource = (*DB)(nil)

// SelectFloats implements signals.SeriesSource: it hands fn every stored
// series ms match with its float samples in (mint, maxt], stale markers
// dropped, as the PromQL engine's range selectors see them and in the order
// it sees them (the TSDB's unsorted selection, by series reference). pts is
// reused after fn returns. A series with a native histogram sample in the
// range fails the call with signals.ErrNotFloat. The query timeout applies;
// the sample limit does not (one series' samples are held at a time).
//
// The metrics of signals.SeriesMetrics are answered from the recent-samples
// cache the DB's appenders fill at commit (the newest samples of every
// series), when it holds every sample of the range; other selections, and
// ranges older than the cache or the head, are read from the TSDB.
func (d *DB) SelectFloats(ctx context.Context, mint, maxt int64, ms []*labels.Matcher, fn func(ls labels.Labels, pts []promql.FPoint)) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", signals.ErrQuery, err)
	}
	if err := d.usable(); err != nil {
		return err
	}
	if d.recent.selectFloats(mint, maxt, d.headMin(), ms, fn) {
		return nil
	}
	return d.selectFloatsTSDB(ctx, mint, maxt, ms, fn)
}

// selectFloatsTSDB is SelectFloats from the TSDB.
func (d *DB) selectFloatsTSDB(ctx context.Context, mint, maxt int64, ms []*labels.Matcher, fn func(ls labels.Labels, pts []promql.FPoint)) error {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	q, err := d.db.Querier(mint, maxt)
	if err != nil {
		return fmt.Errorf("%w: %v", signals.ErrQuery, err)
	}
	defer q.Close()
	// No trimming: the loop below keeps (mint, maxt] itself, without the
	// querier's per-sample interval checks.
	set := q.Select(ctx, false, &storage.SelectHints{Start: mint, End: maxt, Range: maxt - mint, Func: "rate", DisableTrimming: true}, ms...)
	var (
		it  chunkenc.Iterator
		pts []promql.FPoint
		n   int
	)
	for set.Next() {
		if n++; n%1024 == 0 && ctx.Err() != nil {
			return fmt.Errorf("%w: %w", signals.ErrQuery, ctx.Err())
		}
		s := set.At()
		it = s.Iterator(it)
		pts = pts[:0]
		for vt := it.Seek(mint + 1); vt != chunkenc.ValNone; vt = it.Next() {
			if vt != chunkenc.ValFloat {
				if it.AtT() > maxt {
					break
				}
				return fmt.Errorf("%w: %s", signals.ErrNotFloat, s.Labels().Get(model.MetricNameLabel))
			}
			t, v := it.At()
			if t > maxt {
				break
			}
			if value.IsStaleNaN(v) {
				continue
			}
			pts = append(pts, promql.FPoint{T: t, F: v})
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("%w: %v", signals.ErrQuery, err)
		}
		fn(s.Labels(), pts)
	}
	return setErr(ctx, set)
}

// SelectLatest implements signals.SeriesSource: it hands fn every stored
// series ms match with the sample PromQL's instant selector at ts takes:
// the newest in (ts - lookback delta, ts], none when that one is a stale
// marker. A native histogram there fails the call with signals.ErrNotFloat.
// Like SelectFloats it answers from the recent-samples cache when it can.
func (d *DB) SelectLatest(ctx context.Context, ts int64, ms []*labels.Matcher, fn func(ls labels.Labels, t int64, v float64)) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", signals.ErrQuery, err)
	}
	if err := d.usable(); err != nil {
		return err
	}
	if d.recent.selectLatest(ts-d.lookback.Milliseconds()+1, ts, d.headMin(), ms, fn) {
		return nil
	}
	return d.selectLatestTSDB(ctx, ts, ms, fn)
}

// selectLatestTSDB is SelectLatest from the TSDB.
func (d *DB) selectLatestTSDB(ctx context.Context, ts int64, ms []*labels.Matcher, fn func(ls labels.Labels, t int64, v float64)) error {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	mint := ts - d.lookback.Milliseconds() + 1
	q, err := d.db.Querier(mint, ts)
	if err != nil {
		return fmt.Errorf("%w: %v", signals.ErrQuery, err)
	}
	defer q.Close()
	set := q.Select(ctx, false, &storage.SelectHints{Start: mint, End: ts, DisableTrimming: true}, ms...)
	var (
		it chunkenc.Iterator
		n  int
	)
	for set.Next() {
		if n++; n%1024 == 0 && ctx.Err() != nil {
			return fmt.Errorf("%w: %w", signals.ErrQuery, ctx.Err())
		}
		s := set.At()
		it = s.Iterator(it)
		var (
			t, lt int64
			v     float64
			found bool
			vt    chunkenc.ValueType
			last  chunkenc.ValueType
		)
		for vt = it.Seek(mint); vt != chunkenc.ValNone; vt = it.Next() {
			if t = it.AtT(); t > ts {
				break
			}
			found, last, lt = true, vt, t
			if vt == chunkenc.ValFloat {
				_, v = it.At()
			}
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("%w: %v", signals.ErrQuery, err)
		}
		switch {
		case !found:
		case last != chunkenc.ValFloat:
			return fmt.Errorf("%w: %s", signals.ErrNotFloat, s.Labels().Get(model.MetricNameLabel))
		case !value.IsStaleNaN(v):
			fn(s.Labels(), lt, v)
		}
	}
	return setErr(ctx, set)
}

func setErr(ctx context.Context, set storage.SeriesSet) error {
	if err := set.Err(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %w", signals.ErrQuery, ctx.Err())
		}
		return fmt.Errorf("%w: %v", signals.ErrQuery, err)
	}
	return nil
}
