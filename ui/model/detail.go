package model

import (
	"context"
	"fmt"
	"time"
)

// LatencyLevels are the p99 latency levels the engine alerts a service on,
// in seconds: above Warn a P2 alert, above Critical a P1. Source says where
// they come from: "configured" (the engine's configuration) or "learned"
// (the service's healthy baseline).
type LatencyLevels struct {
	Warn     float64 `json:"warn"`
	Critical float64 `json:"critical"`
	Source   string  `json:"source"`
}

// AlertLevel is what the engine compares one signal of a service with:
// Signal "latency_p99" (levels and baseline in seconds) or "error_ratio"
// (ratios). Warn and Critical are nil when no level is in force (learned
// levels while the baseline is still inconclusive, without configured
// floors). WarnFrom and CriticalFrom say where each comes from: "learned"
// (the service's healthy baseline), "floor" (the configured floor of a
// learned level: above it, or in force while it is learning),
// "configured" (the engine's configuration) or "override" (the service's
// own levels). Learned levels come from a baseline of Samples healthy
// intervals, of Needed for it to be conclusive; Baseline is its median,
// nil while it is not.
type AlertLevel struct {
	Signal       string   `json:"signal"`
	InForce      bool     `json:"in_force"`
	Warn         *float64 `json:"warn"`
	Critical     *float64 `json:"critical"`
	Source       string   `json:"source"`
	WarnFrom     string   `json:"warn_from,omitempty"`
	CriticalFrom string   `json:"critical_from,omitempty"`
	Learned      bool     `json:"learned"`
	Baseline     *float64 `json:"baseline"`
	Samples      int      `json:"samples"`
	Needed       int      `json:"needed,omitempty"`
}

// Undeliverable is a rule version the relay gave up delivering to the
// fleet: Reason "too_large" when its Size in bytes is above Limit, the
// message broker's max payload; Error says what the broker answered.
type Undeliverable struct {
	Service string    `json:"service"`
	Version int64     `json:"version"`
	Reason  string    `json:"reason"`
	Size    int       `json:"size"`
	Limit   int       `json:"limit,omitempty"`
	Error   string    `json:"error,omitempty"`
	At      time.Time `json:"at"`
}

// String says what went wrong in one line, for a banner:
// "v12 cannot be delivered: 1.2 MB > 1.0 MB max payload".
// Sizes that round to the same text are given in bytes: "1.0 MB > 1.0 MB"
// would not say why.
func (u Undeliverable) String() string {
	if u.Limit > 0 && u.Size > u.Limit {
		size, limit := Bytes(u.Size), Bytes(u.Limit)
		if size == limit {
			size, limit = fmt.Sprintf("%d B", u.Size), fmt.Sprintf("%d B", u.Limit)
		}
		return fmt.Sprintf("v%d cannot be delivered: %s > %s max payload", u.Version, size, limit)
	}
	why := u.Error
	if why == "" {
		why = u.Reason
	}
	if why == "" {
		why = "the relay gave up on it"
	}
	return fmt.Sprintf("v%d cannot be delivered: %s", u.Version, why)
}

// Bytes formats a size in bytes with a decimal unit (B, kB, MB), one
// decimal; a size that rounds to 1000 of a unit takes the next one.
func Bytes(n int) string {
	if n >= 1_000 {
		if kb := fmt.Sprintf("%.1f", float64(n)/1e3); kb != "1000.0" && n < 1_000_000 {
			return kb + " kB"
		}
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%d B", n)
}

// ServiceDetail is what the engine knows of one service beyond its
// ServiceStatus.
type ServiceDetail struct {
	// P99 is nil when the engine has no p99 levels for the service (alert
	// levels disabled, or the healthy baseline still inconclusive).
	P99 *LatencyLevels `json:"p99_levels,omitempty"`
	// Levels are the alert levels in force per signal (p99 latency, error
	// ratio); nil when the engine does not compare the service.
	Levels []AlertLevel `json:"alert_levels,omitempty"`
	// Undeliverable lists its versions the relay gave up on.
	Undeliverable []Undeliverable `json:"undeliverable,omitempty"`
}

// Details is optionally implemented by a Fleet that reads the engine: the
// service page then draws the p99 levels on its latency chart, lists the
// alert levels in force with their origin and, with the rules timeline,
// warns of versions that cannot be delivered.
type Details interface {
	ServiceDetail(ctx context.Context, service string) (ServiceDetail, error)
}
