package ui_test

import (
	"bufio"
	"context"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/model"
)

// TestOverviewStreamEndsWhenTokenRevoked: a live overview stream opened
// with an API token lives no longer than the token: once it is revoked
// the next tick ends the stream instead of pushing the fleet's state.
func TestOverviewStreamEndsWhenTokenRevoked(t *testing.T) {
	e := newEnv(t)
	e.fleet.Set([]model.ServiceStatus{{Name: "checkout"}}, nil)
	ctx := context.Background()
	vera, err := e.auth.User(ctx, "vera")
	require.NoError(t, err)
	tok, meta, err := e.auth.CreateToken(ctx, principal(vera), "vera", "wallboard", []versioning.Role{versioning.RoleViewer}, 0)
	require.NoError(t, err)
	hr, err := http.NewRequest("GET", e.srv.URL+"/events/overview", nil)
	require.NoError(t, err)
	hr.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(hr)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	rd := bufio.NewReader(resp.Body)
	// next returns the next event's name, "closed" at the end of the stream.
	next := func() string {
		var event string
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return "closed"
			}
			line = strings.TrimRight(line, "\n")
			if line == "" {
				return event
			}
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				event = v
			}
		}
	}
	tick := func() {
		for e.clk.Pending() == 0 {
			runtime.Gosched()
		}
		e.clk.Advance(time.Second)
	}
	require.Equal(t, "summary", next())
	require.Equal(t, "rows", next())
	tick()
	require.Equal(t, "summary", next(), "a valid token's stream goes on")
	require.Equal(t, "rows", next())

	require.NoError(t, e.auth.RevokeToken(ctx, principal(vera), meta.ID))
	tick()
	require.Equal(t, "end", next(), "the stream of a revoked token")
	require.Equal(t, "closed", next())
}
