package inhibit

import (
	"encoding/binary"

	"governor.dev/governor/alerts"
)

// Snapshot is the inhibition of one set of firing alerts, indexed once: per
// rule, the firing sources by the values of the rule's Equal labels, as
// Alertmanager caches them. Building it costs one pass over the alerts per
// rule, and MutedBy then costs a few map lookups per rule, where
// Inhibitor.MutedBy scans every firing alert: a flush of n alerts in a storm
// is linear, not quadratic. MutedBy answers exactly as Inhibitor.MutedBy on
// the same alerts, the same source included. A Snapshot is immutable and
// safe for concurrent use.
type Snapshot struct{ rules []ruleIndex }

type ruleIndex struct {
	rule Rule
	// sources holds, by the Equal labels' values (equalKey), the rule's
	// firing sources with those values.
	sources map[string]sourceSet
}

// sourceSet keeps, in slice order, the first two distinct fingerprints of
// a rule's sources with one set of Equal values: all of them (all), and
// those that do not match the rule's target as well (sourceOnly, the ones
// that may mute a target matching the source too). Two are enough: a
// target skips only its own fingerprint, so the first of the two that is
// not the target's is the source Inhibitor.MutedBy finds first.
type sourceSet struct {
	all, sourceOnly firstTwo
}

type firstTwo struct {
	fp [2]alerts.Fingerprint
	n  int
}

// add keeps fp if it is one of the first two distinct, and says whether
// it did.
func (f *firstTwo) add(fp alerts.Fingerprint) bool {
	if f.n == 2 || (f.n == 1 && f.fp[0] == fp) {
		return false
	}
	f.fp[f.n] = fp
	f.n++
	return true
}

// other returns the first fingerprint that is not self.
func (f *firstTwo) other(self alerts.Fingerprint) (alerts.Fingerprint, bool) {
	for i := range f.n {
		if f.fp[i] != self {
			return f.fp[i], true
		}
	}
	return 0, false
}

// Snapshot indexes firing (in the order given: it decides which source
// MutedBy returns when several mute a target). Resolved alerts (EndsAt
// set) are left out: they mute nothing.
func (in *Inhibitor) Snapshot(firing []alerts.Alert) *Snapshot {
	s := &Snapshot{rules: make([]ruleIndex, len(in.rules))}
	var buf []byte
	for i, r := range in.rules {
		idx := ruleIndex{rule: r, sources: map[string]sourceSet{}}
		for _, src := range firing {
			if !src.EndsAt.IsZero() || !r.Source.Matches(src.Labels) {
				continue
			}
			var set sourceSet
			if len(r.Equal) == 1 {
				set = idx.sources[src.Labels[r.Equal[0]]]
			} else {
				buf = appendEqualKey(buf[:0], r.Equal, src.Labels)
				set = idx.sources[string(buf)]
			}
			alsoTarget := r.Target.Matches(src.Labels)
			if set.all.n == 2 && (alsoTarget || set.sourceOnly.n == 2) {
				continue // nothing to add: skip the fingerprint
			}
			fp := src.Fingerprint()
			changed := set.all.add(fp)
			if !alsoTarget {
				changed = set.sourceOnly.add(fp) || changed
			}
			// Stored only when a fingerprint was kept: at most four times
			// per key, not once per source.
			switch {
			case !changed:
			case len(r.Equal) == 1:
				idx.sources[src.Labels[r.Equal[0]]] = set
			default:
				idx.sources[string(buf)] = set
			}
		}
		s.rules[i] = idx
	}
	return s
}

// MutedBy returns the fingerprint of a firing alert of the snapshot that
// mutes target, and whether there is one, under the rules of
// Inhibitor.MutedBy. It does not allocate for Equal keys of up to 256
// bytes.
func (s *Snapshot) MutedBy(target alerts.Labels) (alerts.Fingerprint, bool) {
	if s == nil || len(s.rules) == 0 {
		return 0, false
	}
	// The target's fingerprint is needed only where a rule has sources
	// for its Equal values: hashed then, once.
	var tfp alerts.Fingerprint
	hashed := false
	var arr [256]byte
	for _, idx := range s.rules {
		r := idx.rule
		if !r.Target.Matches(target) {
			continue
		}
		var set sourceSet
		if len(r.Equal) == 1 {
			set = idx.sources[target[r.Equal[0]]]
		} else {
			set = idx.sources[string(appendEqualKey(arr[:0], r.Equal, target))]
		}
		from := &set.all
		if r.Source.Matches(target) {
			from = &set.sourceOnly
		}
		if from.n == 0 {
			continue
		}
		if !hashed {
			tfp, hashed = target.Fingerprint(), true
		}
		if fp, ok := from.other(tfp); ok {
			return fp, true
		}
	}
	return 0, false
}

// appendEqualKey appends to buf the key of l's values of names (empty
// when missing), each prefixed with its length, so that two label sets get
// one key exactly when every one of their Equal values is the same. With a
// single name the key is its value, used as such.
func appendEqualKey(buf []byte, names []string, l alerts.Labels) []byte {
	for _, n := range names {
		v := l[n]
		buf = binary.AppendUvarint(buf, uint64(len(v)))
		buf = append(buf, v...)
	}
	return buf
}
