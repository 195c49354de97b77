package distribution

import (
	"context"
	"maps"
	"testing"
)

// TestBucketHighestCountsAbortedCanaries: the numbering a restored store
// must reach is the highest version the bucket holds or held, a canary
// aborted above the stable version included (StartCanary refuses any
// version not above it); one service can be asked alone.
func TestBucketHighestCountsAbortedCanaries(t *testing.T) {
	ctx := context.Background()
	pub := newTestPublisher(t, embedded(t).URL())
	for _, p := range [][]byte{payloadOf(t, "checkout", 3), payloadOf(t, "cart.v2", 2)} {
		if _, _, err := pub.Publish(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pub.StartCanary(ctx, payloadOf(t, "checkout", 5), watch10()); err != nil {
		t.Fatal(err)
	}
	if _, err := pub.Abort(ctx, "checkout"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		service string
		want    map[string]int64
	}{
		{"", map[string]int64{"checkout": 5, "cart.v2": 2}},
		{"cart.v2", map[string]int64{"cart.v2": 2}},
		{"checkout", map[string]int64{"checkout": 5}},
		{"unknown", map[string]int64{}},
	}
	for _, tt := range tests {
		got, err := pub.highest(ctx, tt.service)
		if err != nil || !maps.Equal(got, tt.want) {
			t.Fatalf("highest(%q) = %v, %v; want %v", tt.service, got, err, tt.want)
		}
	}
}
