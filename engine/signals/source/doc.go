// Package source builds the engine's signal reading from configuration: the
// Prometheus HTTP API when an address is configured, otherwise the embedded
// store scraping the configured targets, and a signals.Reader over either.
//
// Configuration is JSON, decoded strictly (unknown fields are refused) and
// validated whole before anything starts; durations are strings such as
// "15s". Example:
//
//	{
//	  "prometheus": {"address": "http://prometheus:9090", "timeout": "10s"},
//	  "window": "1m",
//	  "templates": {"cpu": "avg by ({{.By}}) (rate(container_cpu_usage_seconds_total{ {{.Selector}} }[{{.Window}}]))"}
//	}
//
// or, for the embedded default:
//
//	{"embedded": {"interval": "15s", "targets": [{"url": "http://10.0.0.7:8080/metrics"}]}}
package source
