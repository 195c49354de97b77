package alerts

import (
	"fmt"
	"time"
)

// Severity is an alert tier. P0 pages at once, P1 pages, P2 waits for
// business hours or the daily digest.
type Severity string

// The tiers, most urgent first.
const (
	P0 Severity = "P0"
	P1 Severity = "P1"
	P2 Severity = "P2"
)

// SeverityLabel is the label carrying the tier on every alert.
const SeverityLabel = "severity"

// ParseSeverity accepts "P0", "P1" or "P2".
func ParseSeverity(s string) (Severity, error) {
	switch Severity(s) {
	case P0, P1, P2:
		return Severity(s), nil
	}
	return "", fmt.Errorf("%w: severity %q: want P0, P1 or P2", ErrInvalid, s)
}

// Rank orders tiers: 0 for P0 (most urgent), 2 for P2, 3 for unknown.
func (s Severity) Rank() int {
	switch s {
	case P0:
		return 0
	case P1:
		return 1
	case P2:
		return 2
	}
	return 3
}

// MoreUrgent reports whether s outranks o.
func (s Severity) MoreUrgent(o Severity) bool { return s.Rank() < o.Rank() }

// State is where an alert stands.
type State int

// Alert states, as in Prometheus.
const (
	StateInactive State = iota
	StatePending
	StateFiring
)

func (s State) String() string {
	switch s {
	case StatePending:
		return "pending"
	case StateFiring:
		return "firing"
	}
	return "inactive"
}

// ParseState is the inverse of String.
func ParseState(s string) (State, error) {
	switch s {
	case "inactive":
		return StateInactive, nil
	case "pending":
		return StatePending, nil
	case "firing":
		return StateFiring, nil
	}
	return 0, fmt.Errorf("%w: state %q: want inactive, pending or firing", ErrInvalid, s)
}

// Alert is one alert instance as the dispatcher sees it: identified by its
// label set, firing from StartsAt, resolved once EndsAt is set.
type Alert struct {
	Labels      Labels            `json:"labels"`
	Annotations map[string]string `json:"annotations,omitempty"`
	StartsAt    time.Time         `json:"startsAt"`
	// EndsAt is zero while the alert fires and the resolve time after.
	EndsAt time.Time `json:"endsAt,omitzero"`
	// GeneratorURL points back at the rule.
	GeneratorURL string `json:"generatorURL,omitempty"`
}

// Fingerprint identifies the alert by its labels.
func (a Alert) Fingerprint() Fingerprint { return a.Labels.Fingerprint() }

// Resolved reports whether the alert had ended by t.
func (a Alert) Resolved(t time.Time) bool { return !a.EndsAt.IsZero() && !a.EndsAt.After(t) }

// Severity is the tier from the severity label (P2 when missing or unknown).
func (a Alert) Severity() Severity {
	if s, err := ParseSeverity(a.Labels[SeverityLabel]); err == nil {
		return s
	}
	return P2
}
