// Package promapi is the production signals.Source: the Prometheus HTTP
// query API through client_golang's api/prometheus/v1, which Thanos, Mimir
// and VictoriaMetrics serve as well.
//
// Each attempt has a timeout, also sent to the server as the query's
// timeout, cut to whole seconds (whole milliseconds below a second), since
// Prometheus refuses a fractional one such as "1.5s". Attempts that fail
// for reasons that may pass (connection errors, 5xx, 429, server-side
// timeouts) are retried with capped exponential back-off and jitter on the
// injected clock; bad queries are not retried. A Retry-After header on a 429
// or 503 lengthens the wait; one longer than the maximum back-off ends the
// query at once. An error answer that is not the API's error JSON (a 5xx from a
// proxy before Thanos, say) is repeated in the error, its start on one line.
//
// An answer is bounded (Options.MaxResponseBytes, counted after gzip
// decoding): a larger one fails with ErrResponseTooLarge, not retried,
// rather than exhausting the engine's memory.
// Warnings and infos of the response, such as a federated store's partial
// response warning, are returned in signals.Result.Warnings, never dropped.
package promapi
