package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"

	"governor.dev/governor/engine/signals"
)

// ErrClosed is returned by a DB used after Close: its queries and
// selections (wrapped with signals.ErrUnavailable) and its appenders'
// Commit.
var ErrClosed = errors.New("embedded: closed")

// Options configures a DB. Zero fields take the defaults of DefaultOptions.
type Options struct {
	// Dir holds the TSDB blocks cut from the in-memory head. Empty means a
	// temporary directory under os.TempDir() (governor-signals-*, with a
	// lock file beside it that the process holds while the DB is open),
	// removed by Close; one a crashed or killed process left is removed by
	// the next Open without a Dir, once its lock file shows no process has
	// it open. The write-ahead log is disabled: the store is a cache of what
	// targets expose, rebuilt by scraping. A Dir is locked (its file
	// governor-signals.lock) while the DB is open: a second DB, in this
	// process or another, fails to open it. Open removes a block of a Dir
	// that cannot be opened (a crash or a full disk left it corrupted),
	// logging it at error level, instead of failing to start, and the head
	// chunks of the previous run (chunks_head), which hold nothing without
	// the write-ahead log.
	Dir string
	// Retention bounds how long samples are kept. Default 6h.
	Retention time.Duration
	// LookbackDelta is how far back an instant selector looks for a sample,
	// as in Prometheus. Default 5m.
	LookbackDelta time.Duration
	// QueryTimeout bounds one query. Default 30s.
	QueryTimeout time.Duration
	// MaxSamples bounds the samples one query may load. Default 5e6.
	MaxSamples int
	// MaxSeries bounds the series the in-memory head holds. Past it a new
	// series is refused (the scraper drops its samples and counts them in
	// the target's Dropped; a warning is logged) while the series held keep
	// taking samples, so a label with unbounded values (a request ID, a
	// timestamp) cannot exhaust memory; the head forgets series without
	// samples as it cuts blocks. A head series costs about 1-2 KiB.
	// Default 4,000,000; negative disables.
	MaxSeries int
	// Logger receives the TSDB's and query engine's logs. Default: discard.
	Logger *slog.Logger
	// Registerer receives the TSDB's and query engine's metrics
	// (prometheus_tsdb_*, prometheus_engine_*). Default: not registered.
	Registerer prometheus.Registerer
}

// DefaultOptions returns the defaults.
func DefaultOptions() Options {
	return Options{
		Retention:     6 * time.Hour,
		LookbackDelta: 5 * time.Minute,
		QueryTimeout:  30 * time.Second,
		MaxSamples:    5_000_000,
		MaxSeries:     4_000_000,
	}
}

func (o *Options) fill() error {
	d := DefaultOptions()
	for _, f := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"retention", &o.Retention, d.Retention},
		{"lookback_delta", &o.LookbackDelta, d.LookbackDelta},
		{"query_timeout", &o.QueryTimeout, d.QueryTimeout},
	} {
		if *f.v < 0 {
			return fmt.Errorf("%w: %s must not be negative, got %s", signals.ErrInvalidOption, f.name, *f.v)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if o.MaxSamples < 0 {
		return fmt.Errorf("%w: max_samples must not be negative, got %d", signals.ErrInvalidOption, o.MaxSamples)
	}
	if o.MaxSamples == 0 {
		o.MaxSamples = d.MaxSamples
	}
	if o.MaxSeries == 0 {
		o.MaxSeries = d.MaxSeries
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// DB is an in-memory Prometheus TSDB with a PromQL engine. It is a
// signals.Source and a storage.Appendable (the scraper writes into it).
type DB struct {
	db     *tsdb.DB
	engine *promql.Engine
	qopts  promql.QueryOpts
	// timeout bounds one query, SelectFloats and SelectLatest included.
	timeout time.Duration
	// lookback is how far back SelectLatest looks, as instant selectors do.
	lookback time.Duration
	// recent keeps the newest samples of the series the reader reads.
	recent *recent
	// limit bounds the head's series (Options.MaxSeries).
	limit  *seriesLimit
	dir    string
	tmp    *tempDir // nil with Options.Dir
	lock   *os.File // the lock on Options.Dir; nil without one
	closed atomic.Bool
}

var (
	_ signals.PromQLSource = (*DB)(nil)
	_ storage.Appendable   = (*DB)(nil)
)

// Open creates the store.
func Open(opts Options) (*DB, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	dir := opts.Dir
	var (
		tmp  *tempDir
		lock *os.File
	)
	if dir == "" {
		var err error
		if tmp, err = newTempDir(); err != nil {
			return nil, err
		}
		dir = tmp.dir
	} else {
		var err error
		if lock, err = lockDir(dir); err != nil {
			return nil, err
		}
		prepareDir(dir, opts.Logger)
	}
	to := tsdb.DefaultOptions()
	to.WALSegmentSize = -1
	to.RetentionDuration = opts.Retention.Milliseconds()
	to.NoLockfile = true
	if block := opts.Retention.Milliseconds() / 3; block < to.MinBlockDuration {
		to.MinBlockDuration = max(block, time.Minute.Milliseconds())
		to.MaxBlockDuration = to.MinBlockDuration
	}
	db, err := tsdb.Open(dir, opts.Logger, opts.Registerer, to, nil)
	if err != nil {
		if tmp != nil {
			_ = tmp.remove()
		}
		if lock != nil {
			_ = lock.Close()
		}
		return nil, fmt.Errorf("embedded: open tsdb: %w", err)
	}
	engine := promql.NewEngine(promql.EngineOpts{
		Logger:               opts.Logger,
		Reg:                  opts.Registerer,
		MaxSamples:           opts.MaxSamples,
		Timeout:              opts.QueryTimeout,
		LookbackDelta:        opts.LookbackDelta,
		EnableAtModifier:     true,
		EnableNegativeOffset: true,
		Parser:               parser.NewParser(parser.Options{}),
	})
	return &DB{
		db:       db,
		limit:    &seriesLimit{max: opts.MaxSeries, head: db.Head(), logger: opts.Logger},
		engine:   engine,
		qopts:    promql.NewPrometheusQueryOpts(false, opts.LookbackDelta, nil),
		timeout:  opts.QueryTimeout,
		lookback: opts.LookbackDelta,
		recent:   newRecent(),
		dir:      dir,
		tmp:      tmp,
		lock:     lock,
	}, nil
}

// Appender returns a TSDB appender. What it commits of the metrics the
// signal reader reads is also kept in the recent-samples cache (see
// SelectFloats).
func (d *DB) Appender(ctx context.Context) storage.Appender {
	return &recentAppender{Appender: d.db.Appender(ctx), r: d.recent, headMin: d.headMin, closed: &d.closed, limit: d.limit}
}

func (d *DB) headMin() int64 { return d.db.Head().MinTime() }

// Querier gives raw access to the stored series.
func (d *DB) Querier(mint, maxt int64) (storage.Querier, error) { return d.db.Querier(mint, maxt) }

// Close stops the TSDB and removes a temporary directory (see Options.Dir).
// The DB then answers nothing, not even from the recent-samples cache;
// closing it again does nothing.
func (d *DB) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	err := errors.Join(d.engine.Close(), d.db.Close())
	if d.tmp != nil {
		err = errors.Join(err, d.tmp.remove())
		d.tmp = nil
	}
	if d.lock != nil {
		err = errors.Join(err, d.lock.Close())
		d.lock = nil
	}
	return err
}

// Query evaluates an instant query at time at.
func (d *DB) Query(ctx context.Context, q string, at time.Time) (*signals.Result, error) {
	if err := d.usable(); err != nil {
		return nil, err
	}
	qry, err := d.engine.NewInstantQuery(ctx, d.db, d.qopts, q, at)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", signals.ErrQuery, err)
	}
	return d.exec(ctx, qry)
}

// QueryRange evaluates a range query.
func (d *DB) QueryRange(ctx context.Context, q string, r signals.Range) (*signals.Result, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if err := d.usable(); err != nil {
		return nil, err
	}
	qry, err := d.engine.NewRangeQuery(ctx, d.db, d.qopts, q, r.Start, r.End, r.Step)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", signals.ErrQuery, err)
	}
	return d.exec(ctx, qry)
}

// usable fails with ErrClosed once the DB is closed.
func (d *DB) usable() error {
	if d.closed.Load() {
		return fmt.Errorf("%w: %w", signals.ErrUnavailable, ErrClosed)
	}
	return nil
}

func (d *DB) exec(ctx context.Context, qry promql.Query) (*signals.Result, error) {
	defer qry.Close()
	res := qry.Exec(ctx)
	if res.Err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %w", signals.ErrQuery, ctx.Err())
		}
		return nil, fmt.Errorf("%w: %v", signals.ErrQuery, res.Err)
	}
	out := &signals.Result{}
	if len(res.Warnings) > 0 {
		w, infos := res.Warnings.AsStrings(qry.String(), 10, 10)
		out.Warnings = w
		for _, i := range infos {
			out.Warnings = append(out.Warnings, signals.InfoPrefix+i)
		}
	}
	dropped := 0
	switch v := res.Value.(type) {
	case promql.Vector:
		out.Type = signals.TypeVector
		out.Samples = make([]signals.Sample, 0, len(v))
		for _, s := range v {
			if s.H != nil {
				dropped++
				continue
			}
			out.Samples = append(out.Samples, signals.Sample{Labels: toLabels(s.Metric), Point: point(s.T, s.F)})
		}
	case promql.Matrix:
		out.Type = signals.TypeMatrix
		out.Series = make([]signals.Series, 0, len(v))
		for _, s := range v {
			dropped += len(s.Histograms)
			if len(s.Floats) == 0 {
				continue
			}
			ps := make([]signals.Point, len(s.Floats))
			for i, p := range s.Floats {
				ps[i] = point(p.T, p.F)
			}
			out.Series = append(out.Series, signals.Series{Labels: toLabels(s.Metric), Points: ps})
		}
	case promql.Scalar:
		out.Type = signals.TypeScalar
		out.Samples = []signals.Sample{{Labels: signals.Labels{}, Point: point(v.T, v.V)}}
	case promql.String:
		out.Type = signals.TypeString
		out.String = v.V
	default:
		return nil, fmt.Errorf("%w: unexpected result type %T", signals.ErrQuery, res.Value)
	}
	if dropped > 0 {
		out.Warnings = append(out.Warnings, fmt.Sprintf(signals.InfoPrefix+"%d native histogram samples dropped", dropped))
	}
	return out, nil
}

func point(t int64, v float64) signals.Point {
	return signals.Point{T: time.UnixMilli(t), V: v}
}

func toLabels(ls labels.Labels) signals.Labels {
	out := make(signals.Labels, ls.Len())
	ls.Range(func(l labels.Label) { out[l.Name] = l.Value })
	return out
}

// EvaluatesPromQL marks the store as a signals.PromQLSource: its queries run
// through Prometheus's own PromQL engine.
func (d *DB) EvaluatesPromQL() {}
