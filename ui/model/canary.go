package model

import (
	"context"
	"fmt"
	"sync"

	"governor.dev/governor/rules/versioning"
)

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
	// StartCanary stages v to percent (0 < percent < 100) of the instances.
	StartCanary(ctx context.Context, v versioning.Version, percent float64) error
	// Promote makes the staged version the stable one for everyone.
	Promote(ctx context.Context, service string) (int64, error)
	// Abort removes the staged version; its instances return to stable.
	Abort(ctx context.Context, service string) (int64, error)
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
	if percent <= 0 || percent >= 100 {
		return invalid("percent: must be above 0 and below 100")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.canary[v.Service] = CanaryState{Version: v.Number, Percent: percent}
	return nil
}

// Promote makes the canary stable.
func (m *MemoryRollouts) Promote(_ context.Context, service string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.canary[service]
	if !ok {
		return 0, fmt.Errorf("%w: no canary for %s", ErrNotFound, service)
	}
	delete(m.canary, service)
	m.stable[service] = c.Version
	return c.Version, nil
}

// Abort drops the canary.
func (m *MemoryRollouts) Abort(_ context.Context, service string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.canary[service]
	if !ok {
		return 0, fmt.Errorf("%w: no canary for %s", ErrNotFound, service)
	}
	delete(m.canary, service)
	return c.Version, nil
}

// Stable returns the version Promote last made stable.
func (m *MemoryRollouts) Stable(service string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stable[service]
}
