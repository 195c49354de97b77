package embedded

import (
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
)

// recorder is a storage.Appender that checks and counts what it is given.
type recorder struct {
	t       testing.TB
	samples int
	stale   int
}

func (r *recorder) Append(ref storage.SeriesRef, l labels.Labels, _ int64, v float64) (storage.SeriesRef, error) {
	if l.Get(model.MetricNameLabel) == "" || l.Get("job") == "" || l.Get("instance") == "" {
		r.t.Fatalf("appended series without name or target labels: %s", l)
	}
	if value.IsStaleNaN(v) {
		r.stale++
	} else {
		r.samples++
	}
	if ref == 0 {
		ref = storage.SeriesRef(l.Hash())
	}
	return ref, nil
}
func (*recorder) SetOptions(*storage.AppendOptions) {}
func (*recorder) AppendExemplar(ref storage.SeriesRef, _ labels.Labels, _ exemplar.Exemplar) (storage.SeriesRef, error) {
	return ref, nil
}
func (*recorder) AppendHistogram(ref storage.SeriesRef, _ labels.Labels, _ int64, _ *histogram.Histogram, _ *histogram.FloatHistogram) (storage.SeriesRef, error) {
	return ref, nil
}
func (*recorder) AppendHistogramSTZeroSample(ref storage.SeriesRef, _ labels.Labels, _, _ int64, _ *histogram.Histogram, _ *histogram.FloatHistogram) (storage.SeriesRef, error) {
	return ref, nil
}
func (*recorder) UpdateMetadata(ref storage.SeriesRef, _ labels.Labels, _ metadata.Metadata) (storage.SeriesRef, error) {
	return ref, nil
}
func (*recorder) AppendSTZeroSample(ref storage.SeriesRef, _ labels.Labels, _, _ int64) (storage.SeriesRef, error) {
	return ref, nil
}
func (*recorder) Commit() error   { return nil }
func (*recorder) Rollback() error { return nil }

const openMetricsExposition = `# TYPE foo counter
# HELP foo A counter.
foo_total{a="b"} 17.0 1520879607.789 # {id="x"} 1.0
foo_created{a="b"} 1520872607.123
# TYPE lat histogram
lat_bucket{le="0.1"} 3
lat_bucket{le="+Inf"} 5
lat_count 5
lat_sum 0.7
# EOF
`

// FuzzAppend feeds arbitrary bytes, as both exposition formats, through the
// scraper's parse-and-append path twice (so the series cache and staleness
// run): it must never panic, must only store labelled series, and a failed
// parse must store nothing of the second scrape beyond staleness markers.
func FuzzAppend(f *testing.F) {
	for _, s := range []string{
		sdkExposition,
		openMetricsExposition,
		"",
		"a 1\na 2\n",
		"x{job=\"j\",instance=\"i\"} 1\n",
		"# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} NaN\n",
		"{\"utf8.name\",x=\"y\"} 1\n",
		"garbage {{{\n",
		"m{a=\"\\xff\"} 1\n",
		"m 1e400\nm2 -Inf\nm3 Nan\n",
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	target := labels.FromStrings("instance", "127.0.0.1:9", "job", "fuzz")
	f.Fuzz(func(t *testing.T, body []byte, openMetrics bool) {
		ctype := "text/plain; version=0.0.4"
		if openMetrics {
			ctype = "application/openmetrics-text; version=1.0.0"
		}
		c := newSeriesCache(target, 1000)
		for i := range 2 {
			r := &recorder{t: t}
			res, err := c.append(r, body, ctype, int64(1000*(i+1)))
			if err != nil {
				c.staleAll(r, int64(1000*(i+1)))
				continue
			}
			c.staleMissing(r, int64(1000*(i+1)))
			if res.added != r.samples {
				t.Fatalf("reported %d samples, appended %d", res.added, r.samples)
			}
			if res.dropped < 0 {
				t.Fatalf("bad drop count %d", res.dropped)
			}
		}
	})
}
