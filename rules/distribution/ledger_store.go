package distribution

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
)

// LedgerStore persists the ledger. Implementations are safe for concurrent
// use.
type LedgerStore interface {
	// Target returns a service's target; ok is false if none was recorded.
	Target(ctx context.Context, service string) (t Target, ok bool, err error)
	// SetTarget records a service's target.
	SetTarget(ctx context.Context, t Target) error
	// Instance returns one instance; ok is false if unknown.
	Instance(ctx context.Context, service, instance string) (in Instance, ok bool, err error)
	// Instances lists the instances of a service ("" for every service),
	// ordered by service and instance.
	Instances(ctx context.Context, service string) ([]Instance, error)
	// SaveInstance writes an instance and, when tr is not nil, appends the
	// transition, atomically.
	SaveInstance(ctx context.Context, in Instance, tr *Transition) error
	// Transitions returns the newest transitions of a service (and instance,
	// if not ""), newest first, at most limit.
	Transitions(ctx context.Context, service, instance string, limit int) ([]Transition, error)
}

// MemoryStore is a LedgerStore in memory, for tests and the dev stack.
type MemoryStore struct {
	mu          sync.Mutex
	targets     map[string]Target
	instances   map[[2]string]Instance
	transitions []Transition
}

var _ LedgerStore = (*MemoryStore)(nil)

// NewMemoryStore returns an empty store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{targets: map[string]Target{}, instances: map[[2]string]Instance{}}
}

// Target implements LedgerStore.
func (m *MemoryStore) Target(_ context.Context, service string) (Target, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.targets[service]
	return t, ok, nil
}

// SetTarget implements LedgerStore.
func (m *MemoryStore) SetTarget(_ context.Context, t Target) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.targets[t.Service] = t
	return nil
}

// Instance implements LedgerStore.
func (m *MemoryStore) Instance(_ context.Context, service, instance string) (Instance, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	in, ok := m.instances[[2]string{service, instance}]
	in.Labels = maps.Clone(in.Labels)
	return in, ok, nil
}

// Instances implements LedgerStore.
func (m *MemoryStore) Instances(_ context.Context, service string) ([]Instance, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Instance
	for k, in := range m.instances {
		if service == "" || k[0] == service {
			in.Labels = maps.Clone(in.Labels)
			out = append(out, in)
		}
	}
	slices.SortFunc(out, func(a, b Instance) int {
		if c := strings.Compare(a.Service, b.Service); c != 0 {
			return c
		}
		return strings.Compare(a.Instance, b.Instance)
	})
	return out, nil
}

// SaveInstance implements LedgerStore.
func (m *MemoryStore) SaveInstance(_ context.Context, in Instance, tr *Transition) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	in.Labels = maps.Clone(in.Labels)
	m.instances[[2]string{in.Service, in.Instance}] = in
	if tr != nil {
		m.transitions = append(m.transitions, *tr)
	}
	return nil
}

// Transitions implements LedgerStore.
func (m *MemoryStore) Transitions(_ context.Context, service, instance string, limit int) ([]Transition, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Transition
	for i := len(m.transitions) - 1; i >= 0 && (limit <= 0 || len(out) < limit); i-- {
		tr := m.transitions[i]
		if tr.Service == service && (instance == "" || tr.Instance == instance) {
			out = append(out, tr)
		}
	}
	return out, nil
}
