package ui_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
)

// TestTimelinePagesBackToOlderVersions: the rules timeline shows the newest
// 200 versions and links to the older ones, so that the last known-good
// version of a busy service (auto-applied proposals add versions all day)
// can still be found and rolled back to.
func TestTimelinePagesBackToOlderVersions(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ada := versioning.Actor{Name: "ada", Roles: roleUsers["ada"]}
	for i := 1; i <= 203; i++ {
		_, err := e.store.EmergencyPublish(ctx, versioning.Proposal{Ruleset: ruleset("checkout", float64(i)), Author: ada, Reason: "step"})
		require.NoError(t, err)
	}
	has := func(page, s string) bool { return strings.Contains(page, s) }
	sid, _ := e.session("vera")
	_, page := e.do(req{method: "GET", path: "/services/checkout/rules", session: sid})
	require.True(t, has(page, `href="/services/checkout/rules/203"`))
	require.False(t, has(page, `href="/services/checkout/rules/3"`), "the page holds 200 versions")
	require.True(t, has(page, `<a href="/services/checkout/rules?before=4">Older versions</a>`))

	_, page = e.do(req{method: "GET", path: "/services/checkout/rules?before=4", session: sid})
	require.True(t, has(page, `href="/services/checkout/rules/3"`))
	require.True(t, has(page, `href="/services/checkout/rollback/1"`))
	require.False(t, has(page, `href="/services/checkout/rules/4"`))
	require.False(t, has(page, "Older versions"), "nothing older")

	resp, _ := e.do(req{method: "GET", path: "/services/checkout/rules?before=x", session: sid})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
}
