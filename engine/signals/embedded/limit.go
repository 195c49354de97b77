package embedded

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
)

// errSeriesLimit refuses a new series past Options.MaxSeries.
var errSeriesLimit = errors.New("embedded: series limit reached")

// seriesLimit bounds the series of the head (Options.MaxSeries).
type seriesLimit struct {
	max    int // negative: no limit
	head   *tsdb.Head
	logger *slog.Logger
	// over is set while new series are refused, so the warning is logged
	// once per episode rather than once per sample.
	over atomic.Bool
}

// admit returns the reference of the series l when the head holds it, 0
// when it does not and may take it, and errSeriesLimit when it does not and
// is full. Only an append without a reference asks; under the limit it
// costs one atomic load.
func (s *seriesLimit) admit(app storage.Appender, l labels.Labels) (storage.SeriesRef, error) {
	if s.max < 0 || s.head.NumSeries() < uint64(s.max) {
		if s.over.Load() && s.over.Swap(false) {
			s.logger.Info("embedded store: back under the series limit, new series accepted again", "max_series", s.max)
		}
		return 0, nil
	}
	if g, ok := app.(storage.GetRef); ok {
		if ref, _ := g.GetRef(l, l.Hash()); ref != 0 {
			return ref, nil
		}
	}
	if !s.over.Swap(true) {
		s.logger.Warn("embedded store: series limit reached, new series refused until the head forgets old ones (a label with unbounded values?)",
			"max_series", s.max, "first_refused", l.String())
	}
	return 0, fmt.Errorf("%w: %d series (max_series)", errSeriesLimit, s.max)
}
