package recommend

import (
	"encoding/json"
	"testing"
)

// FuzzCeilingOf feeds arbitrary evidence to the parser that reads the
// ceiling an engine version recorded: it must never panic and never return
// a ceiling it would divide by zero with.
func FuzzCeilingOf(f *testing.F) {
	f.Add([]byte(`{"ceiling":{"from":800,"to":1000,"instances":2,"routes":{"api":1000},"per_instance":{"api":500}}}`))
	f.Add([]byte(`{"ceiling":{"to":0,"routes":{}}}`))
	f.Add([]byte(`{"ceiling":null}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, ok := ceilingOf(json.RawMessage(raw))
		if ok && (!(c.To > 0) || len(c.Routes) == 0) {
			t.Fatalf("accepted a ceiling without a positive value or routes: %+v", c)
		}
	})
}

// FuzzDecodeCeiling feeds arbitrary evidence to the decoder every check
// of a submission reads the ceilings of the versions that applied
// themselves with: it must never panic, decode nothing from evidence that
// is not a JSON object, and agree with ceilingOf on what ceilingOf accepts.
func FuzzDecodeCeiling(f *testing.F) {
	f.Add([]byte(`{"ceiling":{"from":800,"to":1000,"instances":2,"routes":{"api":1000},"per_instance":{"api":500}}}`))
	f.Add([]byte(`{"ceiling":{"from":0,"to":5}}`))
	f.Add([]byte(`{"load_score":0.9}`))
	f.Add([]byte(`{"ceiling":"high"}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, ok := decodeCeiling(json.RawMessage(raw))
		if !ok && (c.From != 0 || c.To != 0 || c.Routes != nil) {
			t.Fatalf("not decoded, yet a ceiling returned: %+v", c)
		}
		if ok && !json.Valid(raw) {
			t.Fatalf("decoded a ceiling from invalid JSON %q", raw)
		}
		if strict, sok := ceilingOf(json.RawMessage(raw)); sok && (!ok || strict.To != c.To || strict.From != c.From) {
			t.Fatalf("ceilingOf %+v (%v), decodeCeiling %+v (%v)", strict, sok, c, ok)
		}
	})
}
