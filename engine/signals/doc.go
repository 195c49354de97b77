// Package signals reads the engine's view of the fleet from PromQL.
//
// A Source answers instant and range PromQL queries at a given evaluation
// time. Two implementations exist: promapi (the Prometheus HTTP query API,
// which Thanos, Mimir and VictoriaMetrics also serve) and embedded (a scraper
// feeding an in-memory Prometheus TSDB, queried by Prometheus's own PromQL
// engine). The same queries therefore run in development and production.
//
// A Reader turns a Source into typed signals per service and per instance:
// request rate, error ratio, p50/p99 latency, in-flight, current limit, shed
// ratio (overall and by traffic class), queueing delay, CPU and memory. Each
// signal is a PromQL template (see DefaultTemplates) whose defaults match the
// SDK's metrics contract in docs/metrics.md and which configuration may
// override.
//
// From a PromQLSource (both implementations) Read does not send one query per
// signal: the signals whose templates are the defaults are derived from five
// shared queries (requests by class and outcome, errors, latency buckets and
// queue delay buckets by le, and CPU and memory joined to their services
// once), so each series is selected and decoded once per Read rather than
// once per signal that uses it. Ratios and quantiles are computed in Go from the summed rates exactly
// as the templates compute them (the numerator falls back to zero, 0/0 is
// unknown, histogram_quantile is Prometheus's BucketQuantile). An overridden
// template is always sent as written, and ReaderOptions.PerSignal sends every
// template; the results are the same up to floating-point summation order.
// Reader.Query renders the templates.
//
// From a SeriesSource (the embedded store) the Reader does not send the
// four shared rate queries, nor the default in-flight, limit, freshness and
// reporting templates, through the PromQL engine at all: it reads the
// selected series' samples from the store and computes rate() (PromQL's
// extrapolation and counter-reset handling, step by step), the instant
// selectors' newest sample within the lookback, and the sums, counts and
// maxima itself, in the
// engine's order, so the answers are the engine's to the bit (checked
// against it on seeded fleets with counter resets, gaps, stale markers, NaN
// values and missing series, and fuzzed). A query whose series hold native
// histogram samples falls back to the engine; the process join and every
// overridden template always go to it. BucketQuantile answers a
// histogram_quantile over a rate sum of bucket series the same way, from a
// SeriesSource's samples, or as PromQL from any other Source: the
// evaluator's downstream p99 (DownstreamP99) is one.
//
// Every Read also counts, per key, the instances with a current SDK sample
// (the Reporting template, Entry.Reporting): how many instances a
// service's sums come from, so a consumer can tell a rate that fell from
// one that lost instances to a failed scrape.
//
// A signal that cannot be known is reported as unknown with a Status saying
// why (no series, NaN or infinite, stale, query failed, partial data); it is
// never reported as zero. A query that fails, or times out, makes only the
// signals read from it unknown (Failed); the others keep their values. So
// does a query that answers more than one sample for a key (a template
// without a sum by the scope's labels): no one of them is the key's value.
// NewReader and CheckTemplates refuse such a template before anything
// runs: each override is rendered for both scopes, parsed by Prometheus's
// PromQL parser and refused, naming templates.<signal>, unless its result
// is an instant vector grouped by exactly the scope's labels ({{.By}},
// and class for ShedRatioByClass), following the labels through
// aggregations, binary operations' matching and functions.
//
// # Partial data
//
// A source reports what it found wrong but not fatal as warnings
// (Result.Warnings), which the snapshot keeps (Snapshot.Warnings). A warning
// that says data may be missing, such as a federated store's partial
// response ("store X unavailable") or a remote read that failed, makes the
// signals of that query Partial for every key of the read, since it does not
// say whose series are missing (a key the answer lacks reads Partial too,
// not Missing); a shared query's warning reaches every signal derived from
// it. While the freshness query is partial, a key it did not answer reads
// Partial rather than Stale. PartialData is the classification: PromQL
// annotations ("PromQL info: ...", "PromQL warning: ..."), infos and the
// reader's own notes (InfoPrefix) block nothing; every other warning counts
// as partial data. Snapshot.Partial lists the partial signals with their
// warnings; consumers (engine/evaluate) hold their decisions on them. Counter resets are absorbed by rate(), which every counter-based
// template uses, and ratios are clamped to [0, 1] because scrape misalignment
// between numerator and denominator can push them slightly outside.
package signals
