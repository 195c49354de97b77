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
