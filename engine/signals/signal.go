package signals

import (
	"fmt"
	"math"
	"strconv"
)

// Signal names one signal the engine reads.
type Signal string

// The signals of a service or instance. Units: rates per second, ratios in
// [0, 1], latencies in seconds, CPU in cores, memory in bytes.
const (
	// RequestRate is the offered load: inbound requests per second, every
	// outcome (admitted, shed, rate limited, ...) but the shadow ones, which
	// count again requests already counted as admitted (see ShadowOutcomes).
	RequestRate Signal = "request_rate"
	// ErrorRatio is errors per admitted request.
	ErrorRatio Signal = "error_ratio"
	// LatencyP50 and LatencyP99 are quantiles of admitted-request latency.
	LatencyP50 Signal = "latency_p50"
	LatencyP99 Signal = "latency_p99"
	// InFlight is the number of requests in progress (summed over routes and,
	// per service, over instances).
	InFlight Signal = "inflight"
	// Limit is the current concurrency limit (summed like InFlight).
	Limit Signal = "limit"
	// ShedRatio is the share of offered requests refused: the outcomes
	// of ShedOutcomes (shed, rate limited, timed out in the queue, refused
	// for the caller's deadline or by the overload throttle).
	ShedRatio Signal = "shed_ratio"
	// QueueDelayP99 is the p99 of the time spent queued before admission.
	QueueDelayP99 Signal = "queue_delay_p99"
	// CPU is process CPU use in cores (per service: the instance average).
	CPU Signal = "cpu"
	// Memory is resident memory in bytes (per service: the instance average).
	Memory Signal = "memory"
)

// ShedRatioByClass is the template name of ShedRatio split by traffic class;
// its values land in Entry.ShedByClass.
const ShedRatioByClass Signal = "shed_ratio_by_class"

// Freshness is the template name of the newest-sample timestamp of each key
// (by default of governor_sdk_rules_version, which every SDK instance
// exports). It is not a signal of its own: it decides staleness.
const Freshness Signal = "freshness"

// Reporting is the template name of the number of instances of each key
// with a current SDK sample (by default of governor_sdk_rules_version): per
// service, how many instances its summed signals come from. It is not a
// signal of its own; its count lands in Entry.Reporting.
const Reporting Signal = "reporting"

// All lists the per-entry signals in a stable order.
var All = []Signal{RequestRate, ErrorRatio, LatencyP50, LatencyP99, InFlight, Limit, ShedRatio, QueueDelayP99, CPU, Memory}

// ratio reports whether s is a ratio, clamped to [0, 1].
func (s Signal) ratio() bool {
	return s == ErrorRatio || s == ShedRatio || s == ShedRatioByClass
}

// Status says whether a value is known and, if not, why.
type Status int

// Statuses of a Value.
const (
	// Missing: no series answered (no traffic, not scraped, not exported).
	Missing Status = iota
	// Known: the value is usable.
	Known
	// NotFinite: the query returned NaN or an infinity (0/0 ratios,
	// quantiles of empty histograms).
	NotFinite
	// Stale: the instance's newest sample is older than the reader's MaxAge.
	Stale
	// Failed: the query for this signal failed.
	Failed
	// Partial: the query answered with a warning that data may be missing
	// (see PartialData): a store of a federated setup unavailable, a
	// target not scraped. The value may lack series, so it is unknown.
	// Detail is "<signal>: <warning>", naming the query that warned (the
	// signal's own, or Freshness when that query could not tell whether
	// the key is stale).
	Partial
)

func (s Status) String() string {
	switch s {
	case Known:
		return "known"
	case Missing:
		return "missing"
	case NotFinite:
		return "not_finite"
	case Stale:
		return "stale"
	case Failed:
		return "failed"
	case Partial:
		return "partial"
	}
	return "status(" + strconv.Itoa(int(s)) + ")"
}

// Value is a signal reading. Only a Known value carries a meaningful V; any
// other status means "unknown", never zero.
type Value struct {
	V      float64
	Status Status
	// Detail explains an unknown value (the query error, the sample age).
	Detail string
}

// Known reports whether the value is usable.
func (v Value) Known() bool { return v.Status == Known }

// Get returns the value and whether it is known.
func (v Value) Get() (float64, bool) { return v.V, v.Status == Known }

// KnownValue returns a known value.
func KnownValue(f float64) Value { return Value{V: f, Status: Known} }

// Unknown returns an unknown value with a status and detail.
func Unknown(s Status, detail string) Value { return Value{V: math.NaN(), Status: s, Detail: detail} }

func (v Value) String() string {
	if v.Known() {
		return strconv.FormatFloat(v.V, 'g', 6, 64)
	}
	if v.Detail != "" {
		return fmt.Sprintf("unknown (%s: %s)", v.Status, v.Detail)
	}
	return fmt.Sprintf("unknown (%s)", v.Status)
}

// classify turns a raw query value into a Value for signal s.
func classify(s Signal, f float64) Value {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return Unknown(NotFinite, strconv.FormatFloat(f, 'g', -1, 64))
	}
	if s.ratio() {
		f = min(max(f, 0), 1)
	}
	return KnownValue(f)
}

// ShedOutcomes is the PromQL alternation of the governor_sdk_requests_total
// outcomes that ShedRatio counts as refused (docs/metrics.md). The engine's
// derivation, its default templates and the web UI's shed chart all use it,
// so they cannot disagree.
const ShedOutcomes = "shed|rate_limited|queue_timeout|deadline|overload"

// ShadowOutcomes is the PromQL regular expression of the
// governor_sdk_requests_total outcomes a shadow-mode route counts in
// addition to a request's real outcome (admitted): what enforcing would have
// done. They are not requests of their own, so the offered load (RequestRate)
// and the shed ratios' denominators leave them out.
const ShadowOutcomes = "shadow_.*"

// offered is the label matcher that selects the
// governor_sdk_requests_total series counting offered requests: every
// outcome but ShadowOutcomes.
const offered = `outcome!~"` + ShadowOutcomes + `"`
