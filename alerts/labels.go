package alerts

import (
	"encoding/binary"
	"fmt"
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
func (l Labels) Names() []string { return l.AppendNames(make([]string, 0, len(l))) }

// AppendNames appends the label names, sorted, to dst and returns the
// extended slice, as Names does but into a buffer the caller reuses: it
// does not allocate when dst has room for them.
func (l Labels) AppendNames(dst []string) []string {
	n := len(dst)
	for k := range l {
		dst = append(dst, k)
	}
	slices.Sort(dst[n:])
	return dst
}

// FNV-1a parameters.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// Fingerprint hashes the sorted names and values (FNV-1a, with length
// prefixes so that no two distinct sets collide by concatenation). It does
// not allocate for sets of up to 16 labels.
func (l Labels) Fingerprint() Fingerprint {
	keys := make([]string, 0, 16)
	for k := range l {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	h := uint64(fnvOffset)
	str := func(s string) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		for _, b := range n {
			h = (h ^ uint64(b)) * fnvPrime
		}
		for i := 0; i < len(s); i++ {
			h = (h ^ uint64(s[i])) * fnvPrime
		}
	}
	for _, k := range keys {
		str(k)
		str(l[k])
	}
	return Fingerprint(h)
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
