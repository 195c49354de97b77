package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"

	"governor.dev/governor/rules/versioning"
)

// Errors of Rollouts besides ErrInvalid and ErrNotFound (no canary staged).
var (
	// ErrConflict: the canary is not the one the caller looked at (another
	// version is staged, or a newer stable version overtook it).
	ErrConflict = errors.New("model: conflict")
	// ErrUnavailable: the distribution plane could not be reached.
	ErrUnavailable = errors.New("model: unavailable")
)

// Audit actions of canary rollouts. The canary state lives in the
// distribution plane, not in the rules store, so the pages and the API
// record each action (versioning.Store.RecordAudit) once it took effect, and
// say so when the entry could not be written.
const (
	ActionCanaryStart   versioning.Action = "canary_start"
	ActionCanaryPromote versioning.Action = "canary_promote"
	ActionCanaryAbort   versioning.Action = "canary_abort"
)

// RecordCanary writes a canary action that took effect (action by by on
// version of service, with detail) to the audit log. When it fails, the
// action is not undone: the caller logs the error and tells the person or
// client (httperr.NotRecorded) that the log does not show it.
func RecordCanary(ctx context.Context, store versioning.Store, by versioning.Actor, action versioning.Action, service string, version int64, detail any) error {
	raw, _ := json.Marshal(detail)
	_, err := store.RecordAudit(ctx, versioning.AuditRecord{Actor: by, Action: action, Service: service, Version: version, Detail: raw})
	return err
}

// CanaryState is a version staged to a share of a service's instances.
type CanaryState struct {
	Version int64             `json:"version"`
	Percent float64           `json:"percent"`
	Labels  map[string]string `json:"labels,omitempty"`
}

// Rollouts stages versions (the distribution plane's canary keys). The UI
// records each action in the audit log.
type Rollouts interface {
	// Canary returns the staged version of a service, nil if none.
	Canary(ctx context.Context, service string) (*CanaryState, error)
	// StartCanary stages v to percent (0 < percent < 100) of the instances;
	// if v already is the staged version, it changes its share.
	StartCanary(ctx context.Context, v versioning.Version, percent float64) error
	// Promote makes the staged version the stable one for everyone. version
	// is the one the person looked at: if another is staged, nothing
	// changes and the error is an ErrConflict naming both.
	Promote(ctx context.Context, service string, version int64) (int64, error)
	// Abort removes the staged version, which must be version (else
	// ErrConflict); its instances return to stable.
	Abort(ctx context.Context, service string, version int64) (int64, error)
}

// ValidPercent refuses a canary share that is not above 0 and below 100
// (NaN included: it compares false with everything).
func ValidPercent(percent float64) error {
	if math.IsNaN(percent) || percent <= 0 || percent >= 100 {
		return invalid(fmt.Sprintf("percent: must be above 0 and below 100, not %v", percent))
	}
	return nil
}

// MemoryRollouts is an in-memory Rollouts for the dev stack and tests.
type MemoryRollouts struct {
	mu     sync.Mutex
	canary map[string]CanaryState
	stable map[string]int64
}

// NewMemoryRollouts returns an empty MemoryRollouts.
func NewMemoryRollouts() *MemoryRollouts {
	return &MemoryRollouts{canary: map[string]CanaryState{}, stable: map[string]int64{}}
}

// Canary returns the staged version, nil if none.
func (m *MemoryRollouts) Canary(_ context.Context, service string) (*CanaryState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.canary[service]
	if !ok {
		return nil, nil
	}
	return &c, nil
}

// StartCanary stages v.
func (m *MemoryRollouts) StartCanary(_ context.Context, v versioning.Version, percent float64) error {
	if err := ValidPercent(percent); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.canary[v.Service] = CanaryState{Version: v.Number, Percent: percent}
	return nil
}

// Promote makes the canary of version stable.
func (m *MemoryRollouts) Promote(_ context.Context, service string, version int64) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.staged(service, version, "promoted")
	if err != nil {
		return 0, err
	}
	delete(m.canary, service)
	m.stable[service] = c.Version
	return c.Version, nil
}

// Abort drops the canary of version.
func (m *MemoryRollouts) Abort(_ context.Context, service string, version int64) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.staged(service, version, "aborted")
	if err != nil {
		return 0, err
	}
	delete(m.canary, service)
	return c.Version, nil
}

// staged returns the canary of service if it is of version; m.mu is held.
func (m *MemoryRollouts) staged(service string, version int64, action string) (CanaryState, error) {
	c, ok := m.canary[service]
	if !ok {
		return CanaryState{}, fmt.Errorf("%w: no canary for %s", ErrNotFound, service)
	}
	if c.Version != version {
		return CanaryState{}, fmt.Errorf("%w: canary version %d of %s not %s: version %d is staged now", ErrConflict, version, service, action, c.Version)
	}
	return c, nil
}

// Stable returns the version Promote last made stable.
func (m *MemoryRollouts) Stable(service string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stable[service]
}
