package ui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
)

var checksumRe = regexp.MustCompile(`name="checksum" value="([^"]+)"`)

// checksum is the checksum of the ruleset of version n of service: what an
// approve form carries.
func (e *env) checksum(service string, n int64) string {
	e.t.Helper()
	v, err := e.store.Get(context.Background(), service, n)
	require.NoError(e.t, err)
	return v.Checksum
}

// revise has alice revise her proposal v2 of checkout to rate.
func (e *env) revise(rate float64, reason string) versioning.Version {
	e.t.Helper()
	alice := versioning.Actor{Name: "alice", Roles: roleUsers["alice"]}
	v, err := e.store.Revise(context.Background(), "checkout", 2, versioning.Proposal{BaseVersion: 1, Ruleset: ruleset("checkout", rate), Author: alice, Reason: reason})
	require.NoError(e.t, err)
	return v
}

// An approver approves the ruleset the page showed: a revision made after
// the page was opened refuses the approval with a link to the new revision,
// writing nothing; the approval of the new revision goes through.
func TestApproveFormsCarryTheReviewedChecksum(t *testing.T) {
	e := newEnv(t)
	e.seed()
	sid, csrf := e.session("bob")
	for _, path := range []string{"/services/checkout/rules/2", "/recommendations", "/recommendations/checkout/2"} {
		resp, body := e.do(req{method: "GET", path: path, session: sid})
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		m := checksumRe.FindStringSubmatch(body)
		require.NotNil(t, m, "%s: the approve form carries the checksum", path)
		require.Equal(t, e.checksum("checkout", 2), m[1], path)
	}
	reviewed := e.checksum("checkout", 2)

	e.clk.Advance(5 * time.Minute)
	rev := e.revise(120, "promo day, smaller step")
	require.Equal(t, 1, rev.Revision)
	require.NotEqual(t, reviewed, rev.Checksum)

	resp, body := e.do(req{method: "POST", path: "/services/checkout/rules/2/approve", session: sid, csrf: csrf,
		form: url.Values{"checksum": {reviewed}, "comment": {"lgtm"}}})
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Contains(t, body, "This proposal was revised after you opened it")
	require.Contains(t, body, `<a href="/services/checkout/rules/2">Review revision 1</a>`)
	require.Contains(t, body, `name="checksum" value="`+rev.Checksum+`"`, "the page shows the current revision")
	require.Contains(t, body, "Revision <strong>1</strong>")
	v, err := e.store.Get(context.Background(), "checkout", 2)
	require.NoError(t, err)
	require.Equal(t, versioning.StateProposed, v.State, "nothing was approved")
	require.Empty(t, v.Approvals)

	resp, body = e.do(req{method: "POST", path: "/services/checkout/rules/2/approve", session: sid, csrf: csrf,
		form: url.Values{"checksum": {rev.Checksum}}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	active, err := e.store.Active(context.Background(), "checkout")
	require.NoError(t, err)
	require.Equal(t, int64(2), active.Number)
	require.Equal(t, 120.0, active.Ruleset.Routes[0].RateLimit.Rate, "the revision reviewed is the one that went live")
}

// A form without a checksum approves nothing: the field is named.
func TestApproveFormWithoutChecksumIsRefused(t *testing.T) {
	e := newEnv(t)
	e.seed()
	sid, csrf := e.session("bob")
	resp, body := e.do(req{method: "POST", path: "/services/checkout/rules/2/approve", session: sid, csrf: csrf})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "checksum")
	v, err := e.store.Get(context.Background(), "checkout", 2)
	require.NoError(t, err)
	require.Equal(t, versioning.StateProposed, v.State)
}

// The JSON API takes an optional checksum: a stale one is a 409 naming the
// revision, the current one approves.
func TestAPIApproveChecksum(t *testing.T) {
	e := newEnv(t)
	e.seed()
	reviewed := e.checksum("checkout", 2)
	e.clk.Advance(time.Minute)
	rev := e.revise(130, "smaller step")
	sid, csrf := e.session("bob")
	path := "/api/v1/services/checkout/versions/2/approve"
	resp, body := e.do(req{method: "POST", path: path, session: sid, csrf: csrf, json: `{"comment":"ok","checksum":"` + reviewed + `"}`})
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Contains(t, body, "revised since it was reviewed (revision 1")
	resp, body = e.do(req{method: "POST", path: path, session: sid, csrf: csrf, json: `{"comment":"ok","checksum":"` + rev.Checksum + `"}`})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var v versioning.Version
	require.NoError(t, json.Unmarshal([]byte(body), &v))
	require.Equal(t, versioning.StateApproved, v.State)
	require.Equal(t, 1, v.Revision)
	require.False(t, v.RevisedAt.IsZero())
	require.True(t, strings.Contains(body, `"revised_at"`))
}

// Revision and revision time show on the version page, the timeline and the
// recommendations, and a revision moves a proposal to the top of the list.
func TestRevisionShownAndSorted(t *testing.T) {
	e := newEnv(t)
	e.seed()
	ctx := context.Background()
	alice := versioning.Actor{Name: "alice", Roles: roleUsers["alice"]}
	bob := versioning.Actor{Name: "bob", Roles: roleUsers["bob"]}
	// payments gets an open proposal after checkout's v2.
	e.clk.Advance(time.Minute)
	p1, err := e.store.Propose(ctx, versioning.Proposal{Ruleset: ruleset("payments", 10), Author: alice, Reason: "first"})
	require.NoError(t, err)
	_, err = e.store.Approve(ctx, "payments", p1.Number, bob, "")
	require.NoError(t, err)
	e.clk.Advance(time.Minute)
	_, err = e.store.Propose(ctx, versioning.Proposal{BaseVersion: 1, Ruleset: ruleset("payments", 20), Author: alice, Reason: "payments step"})
	require.NoError(t, err)

	sid, _ := e.session("vera")
	_, body := e.do(req{method: "GET", path: "/recommendations", session: sid})
	require.Less(t, strings.Index(body, "payments v2"), strings.Index(body, "checkout v2"), "newest first")

	e.clk.Advance(time.Minute)
	e.revise(140, "revised")
	_, body = e.do(req{method: "GET", path: "/recommendations", session: sid})
	require.Less(t, strings.Index(body, "checkout v2"), strings.Index(body, "payments v2"), "the revision moves checkout v2 to the top")
	require.Contains(t, body, "revision 1, ")

	_, body = e.do(req{method: "GET", path: "/services/checkout/rules", session: sid})
	require.Contains(t, body, "revision 1, ")
	_, body = e.do(req{method: "GET", path: "/services/checkout/rules/2", session: sid})
	require.Contains(t, body, "Revision <strong>1</strong>, revised ")
}

// Whatever the approve body, the API answers without a 5xx, and an
// approval with a checksum happens only for the ruleset's own checksum.
func FuzzApproveBody(f *testing.F) {
	e := newEnvTB(f)
	e.seed()
	ctx := context.Background()
	bob, err := e.auth.User(ctx, "bob")
	if err != nil {
		f.Fatal(err)
	}
	tok, _, err := e.auth.CreateToken(ctx, principal(bob), "bob", "fuzz", []versioning.Role{versioning.RoleApprover}, 0)
	if err != nil {
		f.Fatal(err)
	}
	v2, err := e.store.Get(ctx, "checkout", 2)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{`{}`, `{"checksum":""}`, `{"checksum":"sha256:0"}`, `{"comment":"ok","checksum":"` + v2.Checksum + `"}`,
		`{"checksum":1}`, `{"checksum":null}`, `[`, `{"checksum":"x","extra":1}`} {
		f.Add(s)
	}
	h := e.srv.Config.Handler
	f.Fuzz(func(t *testing.T, body string) {
		r := httptest.NewRequest("POST", "/api/v1/services/checkout/versions/2/approve", strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+tok)
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code >= 500 {
			t.Fatalf("status %d for %q: %s", w.Code, body, w.Body)
		}
		if w.Code == http.StatusOK {
			var req struct {
				Checksum any `json:"checksum"`
			}
			_ = json.Unmarshal([]byte(body), &req)
			if c, ok := req.Checksum.(string); ok && c != "" && c != v2.Checksum {
				t.Fatalf("approved with checksum %q, the ruleset's is %q", c, v2.Checksum)
			}
		}
	})
}
