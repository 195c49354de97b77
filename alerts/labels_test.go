package alerts

import (
	"slices"
	"testing"
)

// TestAppendNamesSortsTheNamesAfterWhatTheBufferHolds: AppendNames keeps
// what dst holds, appends the names sorted, and reuses dst's room without
// allocating; Names is the same into a new slice.
func TestAppendNamesSortsTheNamesAfterWhatTheBufferHolds(t *testing.T) {
	l := Labels{"service": "checkout", "alertname": "Down", "instance": "i1"}
	if got, want := l.AppendNames([]string{"z"}), []string{"z", "alertname", "instance", "service"}; !slices.Equal(got, want) {
		t.Fatalf("AppendNames = %q, want %q", got, want)
	}
	if got, want := l.Names(), []string{"alertname", "instance", "service"}; !slices.Equal(got, want) {
		t.Fatalf("Names = %q, want %q", got, want)
	}
	if got := (Labels{}).Names(); len(got) != 0 {
		t.Fatalf("Names of no labels = %q", got)
	}
	buf := make([]string, 0, 8)
	if n := testing.AllocsPerRun(100, func() { buf = l.AppendNames(buf[:0]) }); n != 0 {
		t.Fatalf("AppendNames into a buffer with room: %v allocations", n)
	}
}
