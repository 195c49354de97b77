package model

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"governor.dev/governor/sdk/clock"
)

// ErrNotFound: no such alert.
var ErrNotFound = errors.New("model: not found")

// MemoryAlerts is an in-memory Alerts for the dev stack and tests: alerts are
// raised with Fire and resolved with Resolve.
type MemoryAlerts struct {
	clk      clock.Clock
	mu       sync.Mutex
	alerts   []Alert // newest last
	silences []Silence
}

// NewMemoryAlerts returns an empty MemoryAlerts.
func NewMemoryAlerts(clk clock.Clock) *MemoryAlerts {
	if clk == nil {
		clk = clock.Real{}
	}
	return &MemoryAlerts{clk: clk}
}

// Fire raises an alert (Since defaults to now).
func (m *MemoryAlerts) Fire(a Alert) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if a.Since.IsZero() {
		a.Since = m.clk.Now()
	}
	m.alerts = append(m.alerts, a)
}

// Resolve ends a firing alert.
func (m *MemoryAlerts) Resolve(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.alerts {
		if m.alerts[i].ID == id && m.alerts[i].Resolved.IsZero() {
			m.alerts[i].Resolved = m.clk.Now()
		}
	}
}

func (m *MemoryAlerts) silencedUntil(a Alert, now time.Time) time.Time {
	var until time.Time
	for _, s := range m.silences {
		if s.Service == a.Service && (s.Tier == "" || s.Tier == a.Tier) && s.Until.After(now) && s.Until.After(until) {
			until = s.Until
		}
	}
	return until
}

// Firing returns unresolved alerts, most severe and newest first.
func (m *MemoryAlerts) Firing(context.Context) ([]Alert, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clk.Now()
	var out []Alert
	for _, a := range m.alerts {
		if a.Resolved.IsZero() {
			a.SilencedUntil = m.silencedUntil(a, now)
			out = append(out, a)
		}
	}
	slices.SortStableFunc(out, func(a, b Alert) int {
		if a.Tier != b.Tier {
			return compareTier(a.Tier, b.Tier)
		}
		return b.Since.Compare(a.Since)
	})
	return out, nil
}

func compareTier(a, b Tier) int {
	return slices.Index(Tiers[:], a) - slices.Index(Tiers[:], b)
}

// History returns the newest alerts first.
func (m *MemoryAlerts) History(_ context.Context, limit int) ([]Alert, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Clone(m.alerts)
	slices.Reverse(out)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Ack acknowledges a firing alert.
func (m *MemoryAlerts) Ack(_ context.Context, id, by string) (Alert, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.alerts {
		if m.alerts[i].ID == id && m.alerts[i].Resolved.IsZero() {
			if m.alerts[i].AckedBy == "" {
				m.alerts[i].AckedBy, m.alerts[i].AckedAt = by, m.clk.Now()
			}
			return m.alerts[i], nil
		}
	}
	return Alert{}, fmt.Errorf("%w: no firing alert %q", ErrNotFound, id)
}

// Silence records a silence.
func (m *MemoryAlerts) Silence(_ context.Context, s Silence) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.silences = append(m.silences, s)
	return nil
}

// StaticFleet is a Fleet whose state is set by its owner (dev stack, tests).
type StaticFleet struct {
	mu   sync.Mutex
	svcs []ServiceStatus
	err  error
	inst map[string][]Instance
}

// SetInstances replaces a service's instances.
func (f *StaticFleet) SetInstances(service string, in []Instance) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inst == nil {
		f.inst = map[string][]Instance{}
	}
	f.inst[service] = slices.Clone(in)
}

// Instances returns what SetInstances stored.
func (f *StaticFleet) Instances(_ context.Context, service string) ([]Instance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.inst[service]), nil
}

// Set replaces the services and the error Services returns.
func (f *StaticFleet) Set(svcs []ServiceStatus, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.svcs, f.err = slices.Clone(svcs), err
}

// Services returns what Set stored.
func (f *StaticFleet) Services(context.Context) ([]ServiceStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.svcs), f.err
}
