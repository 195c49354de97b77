package versioning

import (
	"encoding/json"
	"strings"
	"testing"
)

func decodeJSON(t *testing.T, s string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// DiffJSON compares named entries by name, other lists of objects by
// position, and shows masks as written.
func TestDiffJSONComparesUnnamedObjectsByPosition(t *testing.T) {
	a := decodeJSON(t, `{"receivers":[{"name":"a","url":"<masked>"}],"routes":[{"receiver":"a"},{"receiver":"a"}]}`)
	b := decodeJSON(t, `{"receivers":[{"name":"a","url":"<masked> (another secret)"}],"routes":[{"receiver":"b"}]}`)
	var got []string
	for _, c := range DiffJSON(a, b) {
		got = append(got, c.Path+" "+string(c.Op)+" "+string(c.Old)+" "+string(c.New))
	}
	want := []string{
		`receivers[a].url changed "<masked>" "<masked> (another secret)"`,
		`routes[0].receiver changed "a" "b"`,
		`routes[1] removed {"receiver":"a"} `,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("DiffJSON:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
