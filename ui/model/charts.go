package model

import (
	"context"
	"time"
)

// Series is one named line of a chart with several lines (a class, a
// downstream).
type Series struct {
	Name   string  `json:"name"`
	Points []Point `json:"points"`
}

// SeriesChart is a chart of several series on shared axes, with a legend.
type SeriesChart struct {
	Title string `json:"title"`
	Unit  string `json:"unit"`
	// Of says what the series are ("class", "downstream"); it heads the
	// legend.
	Of string `json:"of,omitempty"`
	// Series in legend order.
	Series []Series `json:"series"`
	// Min and Max fix the value axis when both are not zero.
	Min float64 `json:"min,omitempty"`
	Max float64 `json:"max,omitempty"`
	// Levels name the integer values of a state chart (index 0 names the
	// value 0: "closed", "half-open", "open"); the lines are then drawn as
	// steps and the axis is labelled with the names.
	Levels []string `json:"levels,omitempty"`
	// NoData says why there is no series (the query failed, or the metric
	// does not exist for the service in the range).
	NoData string `json:"no_data,omitempty"`
	// Failed says why the query failed (the metrics source did not answer,
	// took too long or refused it): there is then nothing to draw, and the
	// page says the query failed rather than that there was no traffic.
	Failed string `json:"failed,omitempty"`
	// Partial is the metrics source's warning that its answer may lack
	// data (a store of a federated query that did not answer, a remote read
	// that failed), several joined by "; ": what is drawn may be
	// incomplete. Infos and PromQL annotations are not partial data.
	Partial string `json:"partial,omitempty"`
}

// ServiceCharts is optionally implemented by a Charts source: the service
// page then draws admitted and shed traffic by priority class and the
// downstream breakers' states over the range.
type ServiceCharts interface {
	ServiceCharts(ctx context.Context, service string, span time.Duration) ([]SeriesChart, error)
}

// Signal names a Window can draw: the engine's signal names
// (engine/signals) and the engine's smoothed load score.
const (
	SignalLoadScore   = "load_score"
	SignalRequestRate = "request_rate"
	SignalErrorRatio  = "error_ratio"
	SignalLatencyP99  = "latency_p99"
)

// Window is optionally implemented by a Charts source that can draw named
// signals of a service over any past window, such as the minutes before an
// engine recommendation. The charts come back in the order of names, each
// with its title and unit; an unknown name is an error.
type Window interface {
	Window(ctx context.Context, service string, start, end time.Time, names ...string) ([]Chart, error)
}
