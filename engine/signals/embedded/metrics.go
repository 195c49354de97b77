package embedded

import (
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type scrapeMetrics struct {
	successes, failures prometheus.Counter
	dropped             prometheus.Counter
	duration            prometheus.Histogram
}

func newScrapeMetrics(r prometheus.Registerer, health func(Health) float64) *scrapeMetrics {
	f := promauto.With(r)
	scrapes := f.NewCounterVec(prometheus.CounterOpts{
		Name: "governor_signals_scrapes_total",
		Help: "Scrapes of embedded-store targets by result (success, failure).",
	}, []string{"result"})
	for _, h := range []Health{HealthUp, HealthDown, HealthUnknown} {
		f.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "governor_signals_targets",
			Help:        "Scrape targets of the embedded store by health.",
			ConstLabels: prometheus.Labels{"health": string(h)},
		}, func() float64 { return health(h) })
	}
	return &scrapeMetrics{
		successes: scrapes.WithLabelValues("success"),
		failures:  scrapes.WithLabelValues("failure"),
		dropped: f.NewCounter(prometheus.CounterOpts{
			Name: "governor_signals_scrape_samples_dropped_total",
			Help: "Scraped samples not stored: duplicates, out of order, invalid labels, new series over the series limit.",
		}),
		duration: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "governor_signals_scrape_duration_seconds",
			Help:    "Duration of scrapes of embedded-store targets.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 8),
		}),
	}
}

func sortStatuses(s []TargetStatus) {
	slices.SortFunc(s, func(a, b TargetStatus) int {
		if c := strings.Compare(a.URL, b.URL); c != 0 {
			return c
		}
		return strings.Compare(a.Labels["job"], b.Labels["job"])
	})
}
