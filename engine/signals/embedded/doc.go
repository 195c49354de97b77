// Package embedded is the engine's zero-setup metrics store: a scraper that
// pulls the /metrics of configured targets, an in-memory Prometheus TSDB with
// bounded retention, and Prometheus's own PromQL engine to answer queries, so
// the engine's signal queries behave the same here as against a real
// Prometheus. The DB is also a signals.SeriesSource (SelectFloats,
// SelectLatest): the signal Reader reads the samples behind its most
// frequent queries directly and computes what the engine would, at a
// fraction of the engine's cost per series.
//
// The scraper follows Prometheus's conventions closely enough that the same
// queries give the same answers: one goroutine per target, a per-scrape
// timeout, the synthetic series up, scrape_duration_seconds and
// scrape_samples_scraped, target labels job and instance (a scraped label
// that collides is kept as exported_<name>), and staleness markers for series
// that disappear, for every series of a failed scrape and for every series of
// a removed target. Timestamps in the exposition are ignored (the scrape time
// is used) and native histograms are not scraped; the SDK exposes neither.
//
// A target that times out, refuses the connection or returns something that
// does not parse is marked down with the error, visible through
// Scraper.Targets and Scraper.StatusHandler; other targets are unaffected.
package embedded
