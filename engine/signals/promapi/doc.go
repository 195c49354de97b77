// Package promapi is the production signals.Source: the Prometheus HTTP
// query API through client_golang's api/prometheus/v1, which Thanos, Mimir
// and VictoriaMetrics serve as well.
//
// Each attempt has a timeout, also sent to the server as the query's
// timeout, cut to whole seconds (whole milliseconds below a second), since
// Prometheus refuses a fractional one such as "1.5s". Attempts that fail
// for reasons that may pass (connection errors, 5xx, 429, server-side
// timeouts) are retried with capped exponential back-off and jitter on the
// injected clock; bad queries are not retried.
// Warnings and infos of the response, such as a federated store's partial
// response warning, are returned in signals.Result.Warnings, never dropped.
package promapi
