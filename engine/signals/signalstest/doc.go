// Package signalstest provides test doubles for the signals packages: a
// synthetic service exposing the SDK's metrics contract (docs/metrics.md)
// with counters that grow linearly in time, so every rate, ratio and
// quantile has an exact expected value whenever it is scraped; and a
// launcher for a real Prometheus server on a random loopback port.
package signalstest
