package events

import (
	"context"
	"fmt"
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

// TestRecorderKeepsAReportOnce: the same emergency publication reported
// twice (the watermark move after the first report failed, or two replicas
// overlapping during a takeover) is listed once; other versions, and
// events without a key, are all kept; once the first report has been
// evicted, a new report is kept again.
func TestRecorderKeepsAReportOnce(t *testing.T) {
	ctx := context.Background()
	r := NewRecorder(4)
	at := time.Unix(0, 0)
	emergency := func(service string, v int64, sec int) Event {
		return Event{Kind: EmergencyPublish, Severity: Warning, Service: service, Version: v,
			At: at.Add(time.Duration(sec) * time.Second), Message: fmt.Sprintf("%s v%d", service, v)}
	}
	r.Emit(ctx, emergency("checkout", 7, 0))
	r.Emit(ctx, emergency("checkout", 7, 1)) // the second replica's report
	r.Emit(ctx, emergency("checkout", 8, 2))
	r.Emit(ctx, emergency("search", 7, 3))
	got := r.Events(EmergencyPublish)
	if len(got) != 3 || got[0].At != at || got[1].Version != 8 || got[2].Service != "search" {
		t.Fatalf("kept %+v, want checkout v7 (first report), checkout v8, search v7", got)
	}
	r.Emit(ctx, Event{Kind: AutoApply, Service: "checkout", Version: 9})
	r.Emit(ctx, Event{Kind: AutoApply, Service: "checkout", Version: 9})
	if got := r.Events(AutoApply); len(got) != 2 {
		t.Fatalf("kept %d auto_apply events, want both (no key)", len(got))
	}
	// Explicit keys.
	k := NewRecorder(10)
	k.Emit(ctx, Event{Kind: BreakerOpen, Key: "b/1"})
	k.Emit(ctx, Event{Kind: BreakerOpen, Key: "b/1"})
	k.Emit(ctx, Event{Kind: BreakerOpen, Key: "b/2"})
	if got := k.Events(""); len(got) != 2 {
		t.Fatalf("kept %+v, want one per key", got)
	}
	// checkout v7 has been evicted (4 kept); checkout v8 is still kept, so
	// a report of it is a no-op, while a new report of v7 is listed again.
	if got := r.Events(""); len(got) != 4 || got[0].Version != 8 {
		t.Fatalf("kept %+v", got)
	}
	r.Emit(ctx, emergency("checkout", 8, 4))
	if got := r.Events(EmergencyPublish); len(got) != 2 {
		t.Fatalf("checkout v8 reported again while kept: %+v", got)
	}
	r.Emit(ctx, emergency("checkout", 7, 5))
	if got := r.Events(EmergencyPublish); len(got) != 2 || got[1].Version != 7 || got[0].Service != "search" {
		t.Fatalf("after eviction: %+v, want search v7 and checkout v7 again", got)
	}
}

// BenchmarkRecorderEmitFull: emitting into a full recorder (the steady
// state of a running engine), from parallel emitters.
func BenchmarkRecorderEmitFull(b *testing.B) {
	r := NewRecorder(500)
	ctx := context.Background()
	e := Event{Kind: LevelCrossed, Severity: Warning, Service: "checkout", Message: "checkout p99 latency is above its warn level"}
	for range 500 {
		r.Emit(ctx, e)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.Emit(ctx, e)
		}
	})
}

// TestFullRecorderDoesNotCopyItsEventsOnEveryEmit: a full recorder (the
// steady state: the level alerts alone report every refresh) used to copy
// all its events into a new slice at every Emit, 64 KiB of garbage and tens
// of microseconds under its lock per event; it overwrites the oldest
// instead, keeping the order and the bound.
func TestFullRecorderDoesNotCopyItsEventsOnEveryEmit(t *testing.T) {
	r := NewRecorder(500)
	ctx := context.Background()
	e := Event{Kind: LevelCrossed, Severity: Warning, Service: "checkout", Message: "checkout p99 latency is above its warn level"}
	for range 600 {
		r.Emit(ctx, e)
	}
	if n := testing.AllocsPerRun(1000, func() { r.Emit(ctx, e) }); n != 0 {
		t.Fatalf("Emit into a full recorder: %v allocations, want 0", n)
	}
	// Order and the bound hold across the wrap.
	for i := range 700 {
		r.Emit(ctx, Event{Kind: AutoApply, Version: int64(i)})
	}
	got := r.Events("")
	if len(got) != 500 || got[0].Version != 200 || got[499].Version != 699 {
		t.Fatalf("kept %d, first v%d, last v%d; want 500, v200 to v699", len(got), got[0].Version, got[len(got)-1].Version)
	}
}
