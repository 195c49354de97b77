package events

import (
	"context"
	"testing"
	"time"
)

func TestRecorderBoundsAndFilters(t *testing.T) {
	r := NewRecorder(3)
	var s Sink = Multi{Discard{}, r}
	at := time.Unix(0, 0)
	for i, k := range []Kind{AutoApply, AutoRollback, AutoApply, LeaderLost, AutoRollback} {
		s.Emit(context.Background(), Event{Kind: k, At: at.Add(time.Duration(i) * time.Second)})
	}
	all := r.Events("")
	if len(all) != 3 {
		t.Fatalf("kept %d events, want 3", len(all))
	}
	if all[0].Kind != AutoApply || all[2].Kind != AutoRollback {
		t.Fatalf("kept the wrong events: %+v", all)
	}
	if got := r.Events(AutoRollback); len(got) != 1 {
		t.Fatalf("filter: got %d rollbacks, want 1", len(got))
	}
}
