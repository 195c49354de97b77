package distribution

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"governor.dev/governor/sdk/watch"
)

// ErrChanged: a ledger record is no longer the one the writer read (another
// ledger replica wrote it meanwhile); nothing was written. Read it again and
// retry.
var ErrChanged = errors.New("distribution: ledger record changed meanwhile")

// LedgerStore persists the ledger. Implementations are safe for concurrent
// use.
//
// Several ledger replicas (engine instances in one queue group) update the
// same records, each by reading, changing and writing one. The writes are
// compare-and-set: SetTarget and SaveInstance write only over the record as
// the writer read it (prev, nil for a record that did not exist) and
// otherwise fail with ErrChanged, so that a replica never writes back a
// stale copy over another's change (an instance's ACK, a new stable
// version).
type LedgerStore interface {
	// Target returns a service's target; ok is false if none was recorded.
	Target(ctx context.Context, service string) (t Target, ok bool, err error)
	// SetTarget records a service's target if its recorded target is still
	// prev (nil: none is recorded); otherwise it fails with ErrChanged.
	SetTarget(ctx context.Context, prev *Target, t Target) error
	// Instance returns one instance; ok is false if unknown.
	Instance(ctx context.Context, service, instance string) (in Instance, ok bool, err error)
	// Instances lists the instances of a service ("" for every service),
	// ordered by service and instance.
	Instances(ctx context.Context, service string) ([]Instance, error)
	// SaveInstance writes an instance and, when tr is not nil, appends the
	// transition, atomically, if the recorded instance is still prev (nil:
	// unknown); otherwise it fails with ErrChanged and writes nothing.
	SaveInstance(ctx context.Context, prev *Instance, in Instance, tr *Transition) error
	// DeleteInstance removes an instance (the ledger forgets one gone for
	// long, LedgerOptions.ForgetAfter) if its record is still prev;
	// otherwise it fails with ErrChanged and deletes nothing. Its
	// transitions stay.
	DeleteInstance(ctx context.Context, prev Instance) error
	// Transitions returns the newest transitions of a service (and instance,
	// if not ""), newest first, at most limit.
	Transitions(ctx context.Context, service, instance string, limit int) ([]Transition, error)
	// PruneTransitions deletes at most limit transitions recorded before
	// before, oldest first, and returns how many it deleted. The newest
	// transition of each instance the store records (the one into its
	// current state) is kept, however old.
	PruneTransitions(ctx context.Context, before time.Time, limit int) (int, error)
}

// InstanceKey names an instance record.
type InstanceKey struct{ Service, Instance string }

// InstanceSave is one write of LedgerBatchStore.SaveInstances: what
// SaveInstance(ctx, Prev, In, Transition) writes.
type InstanceSave struct {
	Prev       *Instance
	In         Instance
	Transition *Transition
}

// SaveError is the error of LedgerBatchStore.SaveInstances when one save
// failed (other than with ErrChanged) and nothing was written.
type SaveError struct {
	// Index is the failed save's index in the call's saves.
	Index int
	Err   error
}

func (e *SaveError) Error() string { return fmt.Sprintf("save %d: %v", e.Index, e.Err) }

func (e *SaveError) Unwrap() error { return e.Err }

// LedgerBatchStore is a LedgerStore that records many messages with one
// commit. It is optional: the ledger records the messages waiting together
// (up to 512) through it when its store implements it, and writes the
// instances a publication or a sweep re-evaluates 512 at a time, and one
// message or instance at a time through SaveInstance (one commit each)
// otherwise. SQLStore implements it; MemoryStore, whose writes cost no
// commit, does not.
type LedgerBatchStore interface {
	LedgerStore
	// InstancesOf returns the recorded instances among keys; an unknown
	// one is missing from the map.
	InstancesOf(ctx context.Context, keys []InstanceKey) (map[InstanceKey]Instance, error)
	// SaveInstances performs the saves, in order, as SaveInstance would
	// each, in one transaction. A save whose recorded instance is no longer
	// its Prev writes nothing and its entry in errs is ErrChanged; every
	// other save is written (errs entry nil). Several saves of one instance
	// chain (each one's Prev is the previous one's In). The ledger passes
	// the saves ordered by service and instance, so that two replicas'
	// batches take their row locks in one order. If the transaction fails,
	// nothing is written and err says why: a *SaveError when one save
	// caused it (the others may be tried again without it).
	SaveInstances(ctx context.Context, saves []InstanceSave) (errs []error, err error)
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
	if t.Selector != nil {
		sel := *t.Selector
		sel.Labels = maps.Clone(sel.Labels)
		t.Selector = &sel
	}
	return t, ok, nil
}

// SetTarget implements LedgerStore.
func (m *MemoryStore) SetTarget(_ context.Context, prev *Target, t Target) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.targets[t.Service]
	if ok != (prev != nil) || (ok && !sameTarget(cur, *prev)) {
		return ErrChanged
	}
	if t.Selector != nil {
		sel := *t.Selector
		sel.Labels = maps.Clone(sel.Labels)
		t.Selector = &sel
	}
	m.targets[t.Service] = t
	return nil
}

// sameTarget reports whether two targets record the same.
func sameTarget(a, b Target) bool {
	return a.Service == b.Service && a.Stable == b.Stable && a.StableAt.Equal(b.StableAt) &&
		a.Canary == b.Canary && a.CanaryAt.Equal(b.CanaryAt) && sameSelector(a.Selector, b.Selector)
}

func sameSelector(a, b *watch.Selector) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Percent == b.Percent && maps.Equal(a.Labels, b.Labels)
}

// sameInstance reports whether two instance records record the same.
func sameInstance(a, b Instance) bool {
	eq := func(x, y time.Time) bool { return x.Equal(y) }
	return a.Service == b.Service && a.Instance == b.Instance && maps.Equal(a.Labels, b.Labels) &&
		a.Running == b.Running && a.Target == b.Target && a.State == b.State && eq(a.Since, b.Since) &&
		eq(a.LastSeen, b.LastSeen) && a.HeartbeatMS == b.HeartbeatMS && a.AckVersion == b.AckVersion &&
		a.NackVersion == b.NackVersion && a.NackReason == b.NackReason && a.NackError == b.NackError &&
		eq(a.NackAt, b.NackAt) && eq(a.MessageAt, b.MessageAt)
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
func (m *MemoryStore) SaveInstance(_ context.Context, prev *Instance, in Instance, tr *Transition) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := [2]string{in.Service, in.Instance}
	cur, ok := m.instances[key]
	if ok != (prev != nil) || (ok && !sameInstance(cur, *prev)) {
		return ErrChanged
	}
	in.Labels = maps.Clone(in.Labels)
	m.instances[key] = in
	if tr != nil {
		m.transitions = append(m.transitions, *tr)
	}
	return nil
}

// DeleteInstance implements LedgerStore.
func (m *MemoryStore) DeleteInstance(_ context.Context, prev Instance) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := [2]string{prev.Service, prev.Instance}
	if cur, ok := m.instances[key]; !ok || !sameInstance(cur, prev) {
		return ErrChanged
	}
	delete(m.instances, key)
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

// PruneTransitions implements LedgerStore.
func (m *MemoryStore) PruneTransitions(_ context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	newest := map[[2]string]int{} // index of each known instance's newest transition
	for i, tr := range m.transitions {
		key := [2]string{tr.Service, tr.Instance}
		if _, ok := m.instances[key]; ok {
			newest[key] = i
		}
	}
	var old []int
	for i, tr := range m.transitions {
		if n, ok := newest[[2]string{tr.Service, tr.Instance}]; tr.At.Before(before) && (!ok || n != i) {
			old = append(old, i)
		}
	}
	slices.SortStableFunc(old, func(a, b int) int { return m.transitions[a].At.Compare(m.transitions[b].At) })
	if len(old) > limit {
		old = old[:limit]
	}
	drop := make(map[int]bool, len(old))
	for _, i := range old {
		drop[i] = true
	}
	kept := m.transitions[:0]
	for i, tr := range m.transitions {
		if !drop[i] {
			kept = append(kept, tr)
		}
	}
	clear(m.transitions[len(kept):])
	m.transitions = kept
	return len(old), nil
}
