// Package events is how the engine tells the rest of the control plane that
// something happened that a person may need to know: an automatic rollback,
// an emergency publication, a lost leadership, a stale instance, an open
// breaker. The engine emits through the small Sink interface; the alerts
// subsystem adapts its router to it, and Recorder keeps the latest events
// for the JSON API and for tests.
package events

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"governor.dev/governor/rules/distribution"
)

// Kind names what happened.
type Kind string

// The kinds the engine emits. EmergencyPublish is emitted by
// engine/evaluate once per emergency version it sees go active; its Detail
// is an evaluate.Emergency.
const (
	AutoRollback          Kind = "auto_rollback"
	AutoApply             Kind = "auto_apply"
	Proposal              Kind = "proposal"
	GuardrailInconclusive Kind = "guardrail_inconclusive"
	// GuardrailSuperseded is emitted by engine/guardrail when a version is
	// replaced by a newer one before its watch reached a verdict; its
	// Detail is the guardrail.Decision (verdict "superseded").
	GuardrailSuperseded Kind = "guardrail_superseded"
	EmergencyPublish    Kind = "emergency_publish"
	LeaderAcquired      Kind = "leader_acquired"
	LeaderLost          Kind = "leader_lost"
	InstanceStale       Kind = "instance_stale"
	BreakerOpen         Kind = "breaker_open"
	// InstanceRecovered is emitted by engine/evaluate when an instance
	// that was STALE or NACKED no longer is (SYNCED, PENDING a newer
	// version, GONE, or out of the ledger); its Detail is a Recovery.
	// Alert sinks clear the instance's stale and nacked alerts at once.
	InstanceRecovered Kind = "instance_recovered"
	// LevelCrossed is emitted by engine/evaluate when a service's p99
	// latency or error ratio goes above one of its alert levels, and again
	// every refresh while it stays above; LevelCleared when it is back at
	// or below. The Detail of both is a Level.
	LevelCrossed Kind = "level_crossed"
	LevelCleared Kind = "level_cleared"
)

// Recovery is the Detail of an InstanceRecovered event.
type Recovery struct {
	// Instance is the ledger record now (only Service and Instance are set
	// when it left the ledger).
	Instance distribution.Instance `json:"instance"`
	// From is the state it recovered from: STALE or NACKED.
	From distribution.State `json:"from"`
}

// The signals and levels of a Level.
const (
	SignalLatencyP99 = "latency_p99"
	SignalErrorRatio = "error_ratio"
	LevelWarn        = "warn"
	LevelCritical    = "critical"
)

// Level is the Detail of LevelCrossed and LevelCleared events.
type Level struct {
	// Signal is SignalLatencyP99 (seconds) or SignalErrorRatio.
	Signal string `json:"signal"`
	// Level is LevelWarn or LevelCritical.
	Level string `json:"level"`
	// Value is the reading; Threshold the level it is compared with.
	Value     float64 `json:"value"`
	Threshold float64 `json:"threshold"`
	// Source says where the level comes from: "learned" (the service's
	// healthy baseline, engine/thresholds) or "configured".
	Source string `json:"source"`
}

// Severity orders events for routing.
type Severity string

// Severities.
const (
	Info     Severity = "info"
	Warning  Severity = "warning"
	Critical Severity = "critical"
)

// Event is one thing that happened.
type Event struct {
	Kind     Kind      `json:"kind"`
	Severity Severity  `json:"severity"`
	At       time.Time `json:"at"`
	Service  string    `json:"service,omitempty"`
	Version  int64     `json:"version,omitempty"`
	Message  string    `json:"message"`
	// Detail is free-form structured context (a guardrail decision, say).
	Detail any `json:"detail,omitempty"`
	// Key, if set, identifies what the event reports: the same occurrence
	// reported again (after a crash, or by two replicas during a leader
	// change) carries the same Key, and Recorder keeps it once.
	Key string `json:"key,omitempty"`
}

// ReportKey is the key Recorder deduplicates e by: e.Key when set; for an
// EmergencyPublish, which reports one emergency version, its kind, service
// and version; "" (never deduplicated) otherwise.
func (e Event) ReportKey() string {
	switch {
	case e.Key != "":
		return e.Key
	case e.Kind == EmergencyPublish && e.Service != "" && e.Version > 0:
		return fmt.Sprintf("%s/%s/v%d", e.Kind, e.Service, e.Version)
	}
	return ""
}

// Sink receives events. Emit must not block for long: a sink that forwards
// over the network queues and drops (counting) rather than stall the engine.
type Sink interface {
	Emit(ctx context.Context, e Event)
}

// Discard drops every event.
type Discard struct{}

// Emit implements Sink.
func (Discard) Emit(context.Context, Event) {}

// Log writes events to a logger.
type Log struct{ Logger *slog.Logger }

// Emit implements Sink.
func (l Log) Emit(ctx context.Context, e Event) {
	lvl := slog.LevelInfo
	switch e.Severity {
	case Warning:
		lvl = slog.LevelWarn
	case Critical:
		lvl = slog.LevelError
	}
	l.Logger.Log(ctx, lvl, "event: "+e.Message, "kind", e.Kind, "service", e.Service, "version", e.Version)
}

// Multi emits to every sink in order.
type Multi []Sink

// Emit implements Sink.
func (m Multi) Emit(ctx context.Context, e Event) {
	for _, s := range m {
		s.Emit(ctx, e)
	}
}

// Recorder keeps the newest events in memory (bounded), newest last. It is
// idempotent on Event.ReportKey: an event whose key is already kept is not
// added again, so an emergency publication reported twice (the watermark
// move after the first report failed, or two replicas overlapping during a
// takeover) is listed once.
type Recorder struct {
	mu  sync.Mutex
	max int
	// events is a ring of up to max events: once full, the oldest is at
	// start and each new event overwrites it, so a full recorder neither
	// copies nor allocates.
	events []Event
	start  int
	keys   map[string]bool // ReportKeys of the kept events
}

// NewRecorder keeps up to max events (default 500 when max < 1).
func NewRecorder(max int) *Recorder {
	if max < 1 {
		max = 500
	}
	return &Recorder{max: max, keys: map[string]bool{}}
}

// Emit implements Sink. An event whose ReportKey is already kept is a
// no-op.
func (r *Recorder) Emit(_ context.Context, e Event) {
	key := e.ReportKey()
	r.mu.Lock()
	defer r.mu.Unlock()
	if key != "" {
		if r.keys[key] {
			return
		}
		r.keys[key] = true
	}
	if len(r.events) < r.max {
		r.events = append(r.events, e)
		return
	}
	if k := r.events[r.start].ReportKey(); k != "" {
		delete(r.keys, k)
	}
	r.events[r.start] = e
	r.start = (r.start + 1) % r.max
}

// Events returns a copy of the kept events, oldest first; kind "" for all.
func (r *Recorder) Events(kind Kind) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []Event{}
	for i := range r.events {
		if e := r.events[(r.start+i)%len(r.events)]; kind == "" || e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}
