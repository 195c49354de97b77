package versioning

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"

	"governor.dev/governor/sdk/rules"
)

// ChangeOp is the kind of a Change.
type ChangeOp string

// Change kinds.
const (
	OpAdded   ChangeOp = "added"
	OpRemoved ChangeOp = "removed"
	OpChanged ChangeOp = "changed"
)

// Change is one difference between two rulesets. Old is empty for OpAdded,
// New for OpRemoved; both are compact JSON with object keys sorted.
type Change struct {
	// Path names the field: object keys joined by dots; entries of routes,
	// downstreams and other lists of named objects by name in brackets
	// ("routes[checkout].rate_limit.rate"); lists of plain values compare as a
	// whole.
	Path string          `json:"path"`
	Op   ChangeOp        `json:"op"`
	Old  json.RawMessage `json:"old,omitempty"`
	New  json.RawMessage `json:"new,omitempty"`
}

// Diff returns the semantic differences from a to b, in a stable order
// (object keys sorted, named list entries by name). Reordering routes or
// downstreams is not a change. A nil ruleset counts as empty.
func Diff(a, b *rules.Ruleset) []Change {
	ta, tb := tree(a), tree(b)
	var out []Change
	diffValue("", ta, tb, false, &out)
	return out
}

// DiffJSON returns the differences from a to b, two JSON documents decoded
// with UseNumber, as Diff compares rulesets, except that lists of objects
// without a distinct name or key compare entry by entry, by position
// ("routes[0].receiver"): in an alerting document the order of routes
// matters. Values are encoded without HTML escaping, so masks ("<masked>")
// read as written.
func DiffJSON(a, b any) []Change {
	var out []Change
	diffValue("", a, b, true, &out)
	return out
}

// tree decodes a ruleset's canonical JSON into maps, slices and json.Numbers.
func tree(r *rules.Ruleset) any {
	if r == nil {
		return map[string]any{}
	}
	b, err := r.Canonical()
	if err != nil {
		return map[string]any{}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return map[string]any{}
	}
	return v
}

// diffValue compares a and b at path; byPosition compares lists of objects
// without a key entry by entry (DiffJSON), else as a whole (Diff).
func diffValue(path string, a, b any, byPosition bool, out *[]Change) {
	switch av := a.(type) {
	case map[string]any:
		if bv, ok := b.(map[string]any); ok {
			diffObject(path, av, bv, byPosition, out)
			return
		}
	case []any:
		if bv, ok := b.([]any); ok {
			if ka, kb := listKey(av), listKey(bv); ka != "" && ka == kb {
				diffNamed(path, ka, av, bv, byPosition, out)
				return
			}
			if byPosition && objects(av) && objects(bv) {
				diffPositions(path, av, bv, out)
				return
			}
		}
	}
	ea, eb := encode(a), encode(b)
	if !bytes.Equal(ea, eb) {
		*out = append(*out, Change{Path: path, Op: OpChanged, Old: ea, New: eb})
	}
}

func diffObject(path string, a, b map[string]any, byPosition bool, out *[]Change) {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := k
		if path != "" {
			p = path + "." + k
		}
		av, inA := a[k]
		bv, inB := b[k]
		switch {
		case !inA:
			*out = append(*out, Change{Path: p, Op: OpAdded, New: encode(bv)})
		case !inB:
			*out = append(*out, Change{Path: p, Op: OpRemoved, Old: encode(av)})
		default:
			diffValue(p, av, bv, byPosition, out)
		}
	}
}

// diffNamed compares lists of objects identified by the string field key.
func diffNamed(path, key string, a, b []any, byPosition bool, out *[]Change) {
	index := func(l []any) (map[string]any, []string) {
		m := make(map[string]any, len(l))
		names := make([]string, 0, len(l))
		for _, e := range l {
			n := e.(map[string]any)[key].(string)
			m[n] = e
			names = append(names, n)
		}
		return m, names
	}
	ma, na := index(a)
	mb, nb := index(b)
	names := append(na, nb...)
	slices.Sort(names)
	names = slices.Compact(names)
	for _, n := range names {
		p := path + "[" + n + "]"
		av, inA := ma[n]
		bv, inB := mb[n]
		switch {
		case !inA:
			*out = append(*out, Change{Path: p, Op: OpAdded, New: encode(bv)})
		case !inB:
			*out = append(*out, Change{Path: p, Op: OpRemoved, Old: encode(av)})
		default:
			diffValue(p, av, bv, byPosition, out)
		}
	}
}

// diffPositions compares lists of objects entry by entry.
func diffPositions(path string, a, b []any, out *[]Change) {
	for i := range max(len(a), len(b)) {
		p := path + "[" + strconv.Itoa(i) + "]"
		switch {
		case i >= len(a):
			*out = append(*out, Change{Path: p, Op: OpAdded, New: encode(b[i])})
		case i >= len(b):
			*out = append(*out, Change{Path: p, Op: OpRemoved, Old: encode(a[i])})
		default:
			diffValue(p, a[i], b[i], true, out)
		}
	}
}

// objects reports whether every element of l is an object.
func objects(l []any) bool {
	for _, e := range l {
		if _, ok := e.(map[string]any); !ok {
			return false
		}
	}
	return true
}

// listKey returns "name" or "key" if every element of l is an object with a
// distinct string value for that field, else "". An empty list has no key.
func listKey(l []any) string {
	if len(l) == 0 {
		return ""
	}
	for _, key := range [...]string{"name", "key"} {
		seen := make(map[string]bool, len(l))
		ok := true
		for _, e := range l {
			m, isObj := e.(map[string]any)
			if !isObj {
				return ""
			}
			s, isStr := m[key].(string)
			if !isStr || seen[s] {
				ok = false
				break
			}
			seen[s] = true
		}
		if ok {
			return key
		}
	}
	return ""
}

// encode is compact JSON without HTML escaping (a mask "<masked>" reads as
// written; the pages escape what they show).
func encode(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return json.RawMessage(strconv.Quote(err.Error()))
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
