// Package embedded is the engine's zero-setup metrics store: a scraper that
// pulls the /metrics of configured targets, an in-memory Prometheus TSDB with
// bounded retention, and Prometheus's own PromQL engine to answer queries, so
// the engine's signal queries behave the same here as against a real
// Prometheus. The DB is also a signals.SeriesSource (SelectFloats,
// SelectLatest): the signal Reader, and the evaluator's downstream p99
// (signals.DownstreamP99), read the samples behind their default queries
// directly and compute what the engine would. For the metrics they read
// (signals.SeriesMetrics) the DB's appenders keep the newest 12
// samples of every series at commit (about 300 bytes a series), so a cycle's
// windows are answered without the TSDB's index lookups or chunk decoding:
// a read of 1,000 services x 10 instances costs 0.15-0.19 CPU-s instead of
// 1.4 through the engine. Older windows are read from the TSDB.
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
// Without a directory of its own (Options.Dir), the DB keeps its blocks in
// a temporary directory, governor-signals-<random> under os.TempDir(), and
// holds a lock on the file of that name plus .lock while it is open: Close
// removes both, and the next Open removes those of a process that crashed
// or was killed (their lock is free), never one in use.
//
// The head holds at most Options.MaxSeries series: past it new series are
// refused (counted as dropped samples of their target, with one warning
// logged) while known ones keep taking samples, so a label with unbounded
// values cannot exhaust the engine's memory.
//
// With a directory of its own, the DB locks it (governor-signals.lock) so no
// second store writes it, and on Open removes what would stop the TSDB from
// starting: blocks that cannot be opened (logged at error level with the
// reason) and the head chunks of the previous run, which hold nothing
// without a write-ahead log.
//
// A target that times out, refuses the connection or returns something that
// does not parse is marked down with the error, visible through
// Scraper.Targets and Scraper.StatusHandler; other targets are unaffected.
package embedded
