package engineclient_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	engineapi "governor.dev/governor/engine/api"
	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/recommend"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/rules/distribution"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/ui/engineclient"
	"governor.dev/governor/ui/model"
)

type evals struct {
	scores []loadscore.Score
	tick   time.Time
}

func (e *evals) Scores() []loadscore.Score                   { return e.scores }
func (e *evals) Recommendations() []recommend.Recommendation { return nil }
func (e *evals) LastTick() time.Time                         { return e.tick }

type ledger map[string][]distribution.Instance

func (l ledger) Instances(_ context.Context, svc string) ([]distribution.Instance, error) {
	if svc == "" {
		var all []distribution.Instance
		for _, ins := range l {
			all = append(all, ins...)
		}
		return all, nil
	}
	return l[svc], nil
}

// TestAgainstEngineAPI reads the real engine API handler.
func TestAgainstEngineAPI(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ev := &evals{tick: t0, scores: []loadscore.Score{
		{Key: signals.Key{Service: "checkout"}, At: t0, Value: 0.83, Known: true, Overloaded: true, Raw: loadscore.Raw{Terms: []loadscore.Contribution{
			{Term: loadscore.Latency, Input: signals.KnownValue(0.4), Normalized: 1, EffectiveWeight: 0.3, Contribution: 0.3, Known: true},
			{Term: loadscore.CPU, Normalized: math.NaN()},
		}}},
		{Key: signals.Key{Service: "search"}, At: t0, Value: math.NaN()},
	}}
	led := ledger{"checkout": {
		{Service: "checkout", Instance: "i1", State: distribution.StateSynced, Running: 3, Target: 3},
		{Service: "checkout", Instance: "i2", State: distribution.StateNacked, Running: 2, Target: 3, NackError: "bad checksum"},
	}}
	srv := httptest.NewServer(engineapi.Handler(engineapi.Options{Evaluations: ev, Versions: st, Ledger: led}))
	t.Cleanup(srv.Close)

	now := t0.Add(10 * time.Second)
	c, err := engineclient.New(engineclient.Options{BaseURL: srv.URL, Now: func() time.Time { return now }})
	require.NoError(t, err)
	svcs, err := c.Services(ctx)
	require.NoError(t, err)
	byName := map[string]int{}
	for i, s := range svcs {
		byName[s.Name] = i
	}
	co := svcs[byName["checkout"]]
	require.Equal(t, 0.83, *co.LoadScore)
	require.True(t, co.Overloaded)
	require.Equal(t, 0.4, *co.P99)
	require.Len(t, co.Terms, 1, "unknown terms are left out")
	require.Equal(t, 1, co.Rollout.Synced)
	require.Equal(t, 1, co.Rollout.Nacked)
	require.Len(t, co.Trend, 1)
	require.Nil(t, svcs[byName["search"]].LoadScore, "no data is not zero")

	ev.tick = t0.Add(time.Second)
	svcs, err = c.Services(ctx)
	require.NoError(t, err)
	require.Len(t, svcs[byName["checkout"]].Trend, 2)

	ins, err := c.Instances(ctx, "checkout")
	require.NoError(t, err)
	require.Len(t, ins, 2)
	require.Equal(t, "bad checksum", ins[1].NackError)
}

func TestEngineDown(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"error":"not ready"}`, http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	c, err := engineclient.New(engineclient.Options{BaseURL: srv.URL})
	require.NoError(t, err)
	_, err = c.Services(context.Background())
	require.ErrorIs(t, err, engineclient.ErrEngine)
	srv.Close()
	_, err = c.Services(context.Background())
	require.ErrorIs(t, err, engineclient.ErrEngine)

	for _, bad := range []string{"", "ftp://x", "http://", "::"} {
		_, err := engineclient.New(engineclient.Options{BaseURL: bad})
		require.Error(t, err, bad)
	}
}

// TestStaleEngineIsNotShownAsLive: an engine that answers but has not
// evaluated for longer than MaxAge (it cannot read its metrics, say) is an
// error the pages show as a banner, not its last scores and overload flags
// presented as current; an engine that has not evaluated yet is not stale.
func TestStaleEngineIsNotShownAsLive(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ev := &evals{tick: t0, scores: []loadscore.Score{{Key: signals.Key{Service: "checkout"}, At: t0, Value: 0.95, Known: true, Overloaded: true}}}
	srv := httptest.NewServer(engineapi.Handler(engineapi.Options{Evaluations: ev, Versions: st}))
	t.Cleanup(srv.Close)
	now := t0.Add(engineclient.DefaultMaxAge)
	c, err := engineclient.New(engineclient.Options{BaseURL: srv.URL, Now: func() time.Time { return now }})
	require.NoError(t, err)
	_, err = c.Services(ctx)
	require.NoError(t, err, "exactly MaxAge old")

	now = now.Add(time.Second)
	_, err = c.Services(ctx)
	require.ErrorIs(t, err, engineclient.ErrStale)
	require.ErrorIs(t, err, engineclient.ErrEngine)
	require.ErrorContains(t, err, "2m1s ago")

	ev.tick = time.Time{} // no evaluation yet
	_, err = c.Services(ctx)
	require.NoError(t, err)

	ev.tick = t0
	never, err := engineclient.New(engineclient.Options{BaseURL: srv.URL, MaxAge: -1, Now: func() time.Time { return now }})
	require.NoError(t, err)
	_, err = never.Services(ctx)
	require.NoError(t, err, "MaxAge negative: never stale")
}

type failingLedger struct{}

func (failingLedger) Instances(context.Context, string) ([]distribution.Instance, error) {
	return nil, errors.New("connection refused")
}

// TestRolloutIsUnknownWhenTheEngineCouldNotReadItsLedger: the standalone UI
// showed "no instances" when the engine had no ledger, and lost every score
// when the engine's ledger failed. The scores are kept, the rollout is
// unknown, and the error says what could not be read.
func TestRolloutIsUnknownWhenTheEngineCouldNotReadItsLedger(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ev := &evals{tick: t0, scores: []loadscore.Score{{Key: signals.Key{Service: "checkout"}, At: t0, Value: 0.5, Known: true}}}
	for _, tc := range []struct {
		name    string
		ledger  engineapi.Ledger
		wantErr string
	}{
		{"no ledger", nil, ""},
		{"ledger failing", failingLedger{}, "delivery ledger: connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(engineapi.Handler(engineapi.Options{Evaluations: ev, Versions: st, Ledger: tc.ledger}))
			defer srv.Close()
			c, err := engineclient.New(engineclient.Options{BaseURL: srv.URL, Now: func() time.Time { return t0 }})
			require.NoError(t, err)
			svcs, err := c.Services(ctx)
			if tc.wantErr == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, tc.wantErr)
			}
			require.Len(t, svcs, 1)
			require.Equal(t, 0.5, *svcs[0].LoadScore, "the scores are kept")
			require.True(t, svcs[0].Rollout.Unknown, "instances unknown, not none")
		})
	}
}

// TestUnpublishedInstancesAreNotCountedAsSynced: the engine's UNPUBLISHED
// count (no rule version published for the instances) reaches the
// rollout as Unpublished, never as Synced.
func TestUnpublishedInstancesAreNotCountedAsSynced(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	led := ledger{"orders": {
		{Service: "orders", Instance: "i1", State: distribution.StateUnpublished},
		{Service: "orders", Instance: "i2", State: distribution.StateUnpublished, Running: 3},
		{Service: "orders", Instance: "i3", State: distribution.StatePending, Target: 4},
	}}
	srv := httptest.NewServer(engineapi.Handler(engineapi.Options{Evaluations: &evals{tick: t0}, Versions: st, Ledger: led}))
	t.Cleanup(srv.Close)
	c, err := engineclient.New(engineclient.Options{BaseURL: srv.URL, Now: func() time.Time { return t0 }})
	require.NoError(t, err)
	svcs, err := c.Services(ctx)
	require.NoError(t, err)
	require.Len(t, svcs, 1)
	require.Equal(t, model.Rollout{Pending: 1, Unpublished: 2}, svcs[0].Rollout)
	ins, err := c.Instances(ctx, "orders")
	require.NoError(t, err)
	require.Len(t, ins, 3)
	require.Equal(t, "UNPUBLISHED", ins[1].State)
	require.Equal(t, int64(3), ins[1].Running)
}
