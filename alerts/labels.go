package alerts

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Labels is a set of label names and values.
type Labels map[string]string

// Fingerprint is a stable 64-bit hash of a label set.
type Fingerprint uint64

// String renders the fingerprint as 16 hex digits, as Alertmanager does.
func (f Fingerprint) String() string { return fmt.Sprintf("%016x", uint64(f)) }

// ParseFingerprint is the inverse of String.
func ParseFingerprint(s string) (Fingerprint, error) {
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: fingerprint %q: %v", ErrInvalid, s, err)
	}
	return Fingerprint(v), nil
}

// Names returns the label names, sorted.
func (l Labels) Names() []string { return slices.Sorted(maps.Keys(l)) }

// Fingerprint hashes the sorted names and values (FNV-1a, with length
// prefixes so that no two distinct sets collide by concatenation).
func (l Labels) Fingerprint() Fingerprint {
	h := fnv.New64a()
	var n [8]byte
	for _, k := range l.Names() {
		for _, s := range []string{k, l[k]} {
			binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
			_, _ = h.Write(n[:])
			_, _ = h.Write([]byte(s))
		}
	}
	return Fingerprint(h.Sum64())
}

// Subset returns the labels named in names (missing ones are absent).
func (l Labels) Subset(names []string) Labels {
	out := Labels{}
	for _, n := range names {
		if v, ok := l[n]; ok {
			out[n] = v
		}
	}
	return out
}

// Merge returns a copy of l overlaid with o.
func (l Labels) Merge(o Labels) Labels {
	out := maps.Clone(l)
	if out == nil {
		out = Labels{}
	}
	maps.Copy(out, o)
	return out
}

// String renders {a="1", b="2"} with sorted names.
func (l Labels) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range l.Names() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(l[k]))
	}
	b.WriteByte('}')
	return b.String()
}
