package signals

import (
	"cmp"
	"maps"
	"slices"
	"time"
)

// Scope selects per-service or per-instance signals.
type Scope int

// Scopes of a read.
const (
	PerService Scope = iota
	PerInstance
)

func (s Scope) String() string {
	if s == PerInstance {
		return "instance"
	}
	return "service"
}

const (
	byService  = "service"
	byInstance = "service, instance"
)

func (s Scope) by() string {
	if s == PerInstance {
		return byInstance
	}
	return byService
}

// Key identifies a service (Instance empty) or one instance of it.
type Key struct {
	Service  string `json:"service"`
	Instance string `json:"instance,omitempty"`
}

func (k Key) String() string {
	if k.Instance == "" {
		return k.Service
	}
	return k.Service + "/" + k.Instance
}

// Compare orders keys by service, then instance.
func (k Key) Compare(o Key) int {
	return cmp.Or(cmp.Compare(k.Service, o.Service), cmp.Compare(k.Instance, o.Instance))
}

// Entry holds the signals of one key.
type Entry struct {
	Key Key `json:"key"`
	// Values has every signal in All; those not answered are Missing.
	Values map[Signal]Value `json:"values"`
	// ShedByClass is the shed ratio per traffic class (classes seen only).
	ShedByClass map[string]Value `json:"shedByClass"`
	// Newest is the time of the newest SDK sample, zero if unknown.
	Newest time.Time `json:"newest"`
	// Reporting is how many instances of the key have a current SDK
	// sample (see the Reporting template): per service, how many
	// instances its sums come from. 0 when unknown.
	Reporting int `json:"reporting"`
}

// Get returns the value of signal s (Missing if the entry lacks it).
func (e *Entry) Get(s Signal) Value {
	if v, ok := e.Values[s]; ok {
		return v
	}
	return Unknown(Missing, "")
}

// Partial returns the detail of the entry's first value that reads as
// Partial (in the order of All, then the classes of ShedByClass by name):
// "<signal>: <warning>", naming the signal whose query warned. ok is false
// when no value is partial.
func (e *Entry) Partial() (detail string, ok bool) {
	for _, s := range All {
		if v := e.Get(s); v.Status == Partial {
			return v.Detail, true
		}
	}
	for _, c := range slices.Sorted(maps.Keys(e.ShedByClass)) {
		if v := e.ShedByClass[c]; v.Status == Partial {
			return v.Detail, true
		}
	}
	return "", false
}

func newEntry(k Key) *Entry {
	e := &Entry{Key: k, Values: make(map[Signal]Value, len(All)), ShedByClass: map[string]Value{}}
	for _, s := range All {
		e.Values[s] = Unknown(Missing, "no series")
	}
	return e
}

// Snapshot is the result of one Read: every key any query answered for.
type Snapshot struct {
	At      time.Time
	Scope   Scope
	Entries map[Key]*Entry
	// Warnings collects the sources' warnings (partial data, annotations)
	// and the reader's own (samples without a service label).
	Warnings []string
	// Errors holds the failed queries by signal, and the signals whose
	// query answered more than one sample for a key (a template that does
	// not aggregate by the scope's labels): no one of them is the key's
	// value, so the signal fails (ErrQuery) rather than reading one.
	Errors map[Signal]error
	// Partial holds, by signal (Freshness and ShedRatioByClass included),
	// the first warning of its query that says data may be missing (see
	// PartialData). Such a signal reads as Partial for every entry, and an
	// entry the freshness query did not answer reads as Partial rather
	// than Stale while that query was partial. A signal whose query failed
	// is in Errors instead.
	Partial map[Signal]string
}

// Get returns signal s of key k; a key the snapshot lacks reads as Missing.
func (s *Snapshot) Get(k Key, sig Signal) Value {
	if e, ok := s.Entries[k]; ok {
		return e.Get(sig)
	}
	return Unknown(Missing, "no series for "+k.String())
}

// Keys returns the keys in order.
func (s *Snapshot) Keys() []Key {
	return slices.SortedFunc(maps.Keys(s.Entries), Key.Compare)
}
