package signals

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValueJSON(t *testing.T) {
	tests := []struct {
		v    Value
		want string
	}{
		{KnownValue(0.25), `{"value":0.25,"status":"known"}`},
		{KnownValue(0), `{"value":0,"status":"known"}`},
		{Unknown(NotFinite, "NaN"), `{"value":null,"status":"not_finite","detail":"NaN"}`},
		{Value{V: math.Inf(1), Status: Known}, `{"value":null,"status":"known"}`},
		{Unknown(Stale, "old"), `{"value":null,"status":"stale","detail":"old"}`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(tt.v)
		require.NoError(t, err)
		require.JSONEq(t, tt.want, string(b))
	}
	e := newEntry(Key{Service: "a", Instance: "i"})
	_, err := json.Marshal(e)
	require.NoError(t, err, "an entry full of unknown values encodes")
}

func TestSnapshotJSON(t *testing.T) {
	snap := &Snapshot{At: now, Scope: PerInstance, Entries: map[Key]*Entry{}, Errors: map[Signal]error{CPU: ErrQuery}}
	for _, k := range []Key{{"b", "i1"}, {"a", "i2"}} {
		snap.Entries[k] = newEntry(k)
	}
	snap.Entries[Key{"a", "i2"}].Values[RequestRate] = KnownValue(3)
	b, err := json.Marshal(snap)
	require.NoError(t, err)
	var got struct {
		At      string
		Scope   string
		Entries []struct {
			Key    Key
			Values map[string]struct {
				Value  *float64
				Status string
			}
		}
		Errors map[string]string
	}
	require.NoError(t, json.Unmarshal(b, &got))
	require.Equal(t, "instance", got.Scope)
	require.Equal(t, "2026-01-01T12:00:00Z", got.At)
	require.Len(t, got.Entries, 2)
	require.Equal(t, Key{Service: "a", Instance: "i2"}, got.Entries[0].Key)
	require.Equal(t, 3.0, *got.Entries[0].Values["request_rate"].Value)
	require.Nil(t, got.Entries[1].Values["request_rate"].Value)
	require.Equal(t, map[string]string{"cpu": "signals: query failed"}, got.Errors)
}
