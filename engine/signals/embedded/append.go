package embedded

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
)

// Scrape errors.
var (
	errSampleLimit = errors.New("embedded: sample limit exceeded")
	errParse       = errors.New("embedded: exposition parse error")
)

// cacheEntry remembers a series between scrapes: its storage reference and
// final labels, and the scrape iteration it was last seen in.
type cacheEntry struct {
	ref  storage.SeriesRef
	lset labels.Labels
	iter uint64
}

// seriesCache maps the raw series text of a target's exposition to its
// stored series. It gives staleness: a series seen in the previous scrape
// and not in this one gets a stale marker. Not safe for concurrent use; each
// target loop owns one.
type seriesCache struct {
	target  labels.Labels
	entries map[string]*cacheEntry
	iter    uint64
	symbols *labels.SymbolTable
	scratch labels.Labels
	builder *labels.Builder
	limit   int
}

func newSeriesCache(target labels.Labels, sampleLimit int) *seriesCache {
	return &seriesCache{
		target:  target,
		entries: map[string]*cacheEntry{},
		symbols: labels.NewSymbolTable(),
		builder: labels.NewBuilder(labels.EmptyLabels()),
		limit:   sampleLimit,
	}
}

// appendResult counts what one scrape stored.
type appendResult struct {
	added, dropped int
}

// append parses body and appends its float samples at ts. On error the
// caller must roll the appender back; the cache is left consistent (entries
// added by the failed scrape are kept, which only saves work later).
func (c *seriesCache) append(app storage.Appender, body []byte, contentType string, ts int64) (appendResult, error) {
	var res appendResult
	p, err := textparse.New(body, contentType, c.symbols, textparse.ParserOptions{
		FallbackContentType:     "text/plain",
		IgnoreNativeHistograms:  true,
		OpenMetricsSkipSTSeries: true,
	})
	if p == nil {
		return res, fmt.Errorf("%w: %v", errParse, err)
	}
	c.iter++
	for {
		et, err := p.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return res, fmt.Errorf("%w: %v", errParse, err)
		}
		if et != textparse.EntrySeries {
			continue // help, type, unit, comments; native histograms are ignored
		}
		raw, _, v := p.Series() // exposition timestamps are ignored: the scrape time is used
		e, ok := c.entries[string(raw)]
		if !ok {
			p.Labels(&c.scratch)
			lset, ok := c.finalLabels(c.scratch)
			if !ok {
				res.dropped++
				continue
			}
			e = &cacheEntry{lset: lset}
			c.entries[string(raw)] = e
		}
		if e.iter == c.iter {
			res.dropped++ // the same series twice in one exposition
			continue
		}
		e.iter = c.iter
		if c.limit > 0 && res.added >= c.limit {
			return res, fmt.Errorf("%w: more than %d samples", errSampleLimit, c.limit)
		}
		if value.IsStaleNaN(v) {
			v = math.Float64frombits(value.NormalNaN) // a target may not write our stale markers
		}
		ref, err := app.Append(e.ref, e.lset, ts, v)
		if err != nil {
			if soft(err) {
				res.dropped++
				continue
			}
			return res, fmt.Errorf("embedded: append: %w", err)
		}
		e.ref = ref
		res.added++
	}
	return res, nil
}

// finalLabels attaches the target labels to scraped labels. A scraped label
// that collides with a target label is kept as exported_<name>, as
// Prometheus does with honor_labels: false.
func (c *seriesCache) finalLabels(scraped labels.Labels) (labels.Labels, bool) {
	c.builder.Reset(scraped)
	c.target.Range(func(l labels.Label) {
		if v := scraped.Get(l.Name); v != "" {
			c.builder.Set(model.ExportedLabelPrefix+l.Name, v)
		}
		c.builder.Set(l.Name, l.Value)
	})
	lset := c.builder.Labels()
	if lset.Get(model.MetricNameLabel) == "" || !lset.IsValid(model.UTF8Validation) {
		return labels.EmptyLabels(), false
	}
	if _, dup := lset.HasDuplicateLabelNames(); dup {
		return labels.EmptyLabels(), false
	}
	return lset, true
}

// soft reports append errors that drop one sample but not the scrape.
func soft(err error) bool {
	return errors.Is(err, storage.ErrOutOfOrderSample) ||
		errors.Is(err, storage.ErrDuplicateSampleForTimestamp) ||
		errors.Is(err, storage.ErrOutOfBounds) ||
		errors.Is(err, storage.ErrTooOldSample) ||
		errors.Is(err, errSeriesLimit)
}

// staleMissing writes stale markers at ts for series not seen in the last
// successful scrape and forgets them.
func (c *seriesCache) staleMissing(app storage.Appender, ts int64) {
	for k, e := range c.entries {
		if e.iter == c.iter {
			continue
		}
		if e.iter == c.iter-1 || e.ref != 0 {
			_, _ = app.Append(e.ref, e.lset, ts, math.Float64frombits(value.StaleNaN))
		}
		delete(c.entries, k)
	}
}

// staleAll writes stale markers at ts for every known series and forgets
// them: the target failed or went away.
func (c *seriesCache) staleAll(app storage.Appender, ts int64) {
	for k, e := range c.entries {
		if e.ref != 0 {
			_, _ = app.Append(e.ref, e.lset, ts, math.Float64frombits(value.StaleNaN))
		}
		delete(c.entries, k)
	}
}
