package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

var revisionRe = regexp.MustCompile(`id="policy-checkout"[^>]*>\s*<input type="hidden" name="csrf" value="[^"]*">\s*<input type="hidden" name="revision" value="(\d+)">`)

// TestPolicyChangeDecidedOnAnOldRevisionConflicts: an admin's settings form
// and an API client's GET-edit-PUT carry the policy revision they saw; a
// change saved since is a 409 or the form back with the conflict, never
// silently reverted.
func TestPolicyChangeDecidedOnAnOldRevisionConflicts(t *testing.T) {
	e := newEnv(t)
	e.seed()
	ctx := context.Background()
	sid, csrf := e.session("ada")

	resp, body := e.do(req{method: "PUT", path: "/api/v1/services/checkout/policy", session: sid, csrf: csrf, json: `{"approvals_required":1}`})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)

	// The form as the admin loaded it.
	_, body = e.do(req{method: "GET", path: "/settings", session: sid})
	m := revisionRe.FindStringSubmatch(body)
	require.NotNil(t, m, "the policy form carries the revision")
	seen := m[1]

	// Another admin changes the policy through the API meanwhile.
	resp, body = e.do(req{method: "PUT", path: "/api/v1/services/checkout/policy", session: sid, csrf: csrf, json: `{"manual_only":true}`})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	pol, err := e.store.Policy(ctx, "checkout")
	require.NoError(t, err)
	require.True(t, pol.ManualOnly)

	{
		require.NotEqual(t, "0", seen, "the seeded policy has a revision")
		resp, body = e.do(req{method: "POST", path: "/settings/policies/checkout", session: sid, csrf: csrf,
			form: url.Values{"approvals": {"2"}, "band": {"default"}, "revision": {seen}}})
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, body)
		after, err := e.store.Policy(ctx, "checkout")
		require.NoError(t, err)
		require.True(t, after.ManualOnly, "the other admin's change stays")
		require.Equal(t, pol.Revision, after.Revision)
	}

	// The API with the revision of the first read.
	stale := pol.Revision
	resp, body = e.do(req{method: "PUT", path: "/api/v1/services/checkout/policy", session: sid, csrf: csrf, json: `{"manual_only":false}`})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	resp, body = e.do(req{method: "PUT", path: "/api/v1/services/checkout/policy", session: sid, csrf: csrf,
		json: `{"approvals_required":2,"revision":` + itoa(stale) + `}`})
	require.Equal(t, http.StatusConflict, resp.StatusCode, body)
	after, err := e.store.Policy(ctx, "checkout")
	require.NoError(t, err)
	require.False(t, after.ManualOnly)
	require.Equal(t, 1, after.ApprovalsRequired, "nothing saved on a conflict")

	resp, body = e.do(req{method: "PUT", path: "/api/v1/services/checkout/policy", session: sid, csrf: csrf, json: `{"revision":0}`})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, body)
	require.Contains(t, body, `"field":"revision"`)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
