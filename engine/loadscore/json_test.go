package loadscore

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/signals"
)

func TestScoreJSON(t *testing.T) {
	tr, err := New(Options{})
	require.NoError(t, err)
	unknown := tr.Observe(t0, entry("s", map[signals.Signal]float64{signals.CPU: 0.5}))
	b, err := json.Marshal(unknown)
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(b, &got))
	require.Nil(t, got["value"])
	raw := got["raw"].(map[string]any)
	require.Nil(t, raw["score"])
	require.Equal(t, "known weight 0.40 below the required 0.50", raw["reason"])
	terms := raw["terms"].([]any)
	require.Len(t, terms, 3)
	mem := terms[1].(map[string]any)
	require.Equal(t, "memory", mem["term"])
	require.Nil(t, mem["normalized"])
	require.Equal(t, map[string]any{"value": nil, "status": "missing", "detail": "no series"}, mem["input"])

	known := tr.Observe(t0.Add(time.Second), entry("s", map[signals.Signal]float64{signals.CPU: 0.5, signals.Memory: 512 * mib, signals.LatencyP99: 0.125}))
	b, err = json.Marshal(known)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &got))
	require.InDelta(t, 0.5, got["value"], 1e-12)
	require.Equal(t, map[string]any{"service": "s", "instance": "i1"}, got["key"])
	cpu := got["raw"].(map[string]any)["terms"].([]any)[0].(map[string]any)
	require.InDelta(t, 0.5, cpu["normalized"], 1e-12)
	require.InDelta(t, 0.2, cpu["contribution"], 1e-12)
}
