package pages

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
)

// TestRollbackSubmittedTwiceRollsBackOnceAndSaysSo: a rollback form sent
// twice (a double click, a resent POST) rolls back once, and the second
// answer leads to that rollback like the first, never "nothing was rolled
// back" with the button enabled again. Another person's form computed
// against the same version still comes back as a fresh preview.
func TestRollbackSubmittedTwiceRollsBackOnceAndSaysSo(t *testing.T) {
	h := newHarness(t, nil)
	h.liveV2()
	ctx := context.Background()
	otto, ottoCSRF := h.session("otto")
	alice, aliceCSRF := h.session("alice")
	form := url.Values{"from": {"2"}, "reason": {"errors up"}, "confirm": {"yes"}}

	for range 2 {
		resp, body := h.do("POST", "/services/checkout/rollback/1", otto, ottoCSRF, form)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
		require.Equal(t, "/services/checkout/rules/3", resp.Header.Get("Location"))
	}
	all, err := h.store.List(ctx, versioning.ListFilter{Service: "checkout"})
	require.NoError(t, err)
	require.Len(t, all, 3, "one rollback")
	a, err := h.store.Active(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, int64(3), a.Number)
	require.Equal(t, int64(1), a.RollbackOf)

	resp, body := h.do("POST", "/services/checkout/rollback/1", alice, aliceCSRF, form)
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Contains(t, body, "Nothing was rolled back: v3 went live after this preview was computed against v2.")
}

// TestRollbackFormErrorsMarkAndFocusTheField: a rollback form sent back
// with an error marks the field the error is about as invalid, ties it to
// the error text and puts the focus on it, so a keyboard or screen reader
// user lands on what to fix rather than at the top of a long diff. A
// disabled button (here Roll back, and Reject on a version page) is
// described by the sentence saying why.
func TestRollbackFormErrorsMarkAndFocusTheField(t *testing.T) {
	h := newHarness(t, nil)
	h.liveV2()
	sid, csrf := h.session("otto")
	marked := `aria-invalid="true" aria-describedby="rollback-error" autofocus`

	resp, body := h.do("POST", "/services/checkout/rollback/1", sid, csrf, url.Values{"from": {"2"}, "reason": {"errors up"}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, `<div class="banner banner-error" role="alert" id="rollback-error">Confirm that you reviewed the changes.</div>`)
	require.Contains(t, body, `<input type="checkbox" name="confirm" value="yes" required `+marked+`>`)
	require.Contains(t, body, `value="errors up">`, "the reason is not marked")

	resp, body = h.do("POST", "/services/checkout/rollback/1", sid, csrf, url.Values{"from": {"2"}, "reason": {"  "}, "confirm": {"yes"}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, `id="rollback-error">reason: `)
	require.Contains(t, body, `<input id="reason" name="reason" type="text" required maxlength="4096" value="" `+marked+`>`)
	require.Contains(t, body, `<input type="checkbox" name="confirm" value="yes" required>`, "the checkbox is not marked")

	resp, body = h.do("GET", "/services/checkout/rollback/2", sid, "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `disabled aria-describedby="rollback-why">Roll back to v2</button>`)
	require.Contains(t, body, `<p class="why" id="rollback-why">Roll back is disabled: v2 is already active</p>`)

	_, err := h.store.Propose(context.Background(), versioning.Proposal{BaseVersion: 2, Ruleset: harnessRuleset("checkout", 200),
		Author: versioning.Actor{Name: "alice", Roles: harnessUsers["alice"]}, Reason: "more"})
	require.NoError(t, err)
	resp, body = h.do("GET", "/services/checkout/rules/3", sid, "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `formaction="/services/checkout/rules/3/reject" disabled aria-describedby="reject-why">Reject</button>`)
	require.Contains(t, body, `<p class="why" id="reject-why">Reject is disabled: `)
}

// TestRollbackToAVersionThatNoLongerValidatesIsRefused: a version stored
// before the validation it now fails (a limit tightened since) is not
// rolled back to: the instances would refuse it in the middle of an
// incident. The preview says why, with its button disabled, and a post is
// refused naming the field; nothing is written.
func TestRollbackToAVersionThatNoLongerValidatesIsRefused(t *testing.T) {
	h := newHarness(t, nil)
	h.liveV2()
	ctx := context.Background()
	for _, q := range []string{
		`DROP TRIGGER rule_versions_revise_only_open`,
		`DROP TRIGGER rule_versions_immutable`,
		`UPDATE rule_versions SET content = replace(content, '"rate":100', '"rate":-1') WHERE service = 'checkout' AND number = 1`,
	} {
		_, err := h.db.ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	v1, err := h.store.Get(ctx, "checkout", 1)
	require.NoError(t, err)
	require.Equal(t, -1.0, v1.Ruleset.Routes[0].RateLimit.Rate, "the stored content no longer validates")

	sid, csrf := h.session("otto")
	resp, body := h.do("GET", "/services/checkout/rollback/1", sid, "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `disabled aria-describedby="rollback-why"`)
	require.Contains(t, body, "Roll back is disabled: v1 no longer passes validation (routes[0].rate_limit.rate: ")

	resp, body = h.do("POST", "/services/checkout/rollback/1", sid, csrf, url.Values{"from": {"2"}, "reason": {"errors up"}, "confirm": {"yes"}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, body)
	require.Contains(t, body, "routes[0].rate_limit.rate: ")
	a, err := h.store.Active(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, int64(2), a.Number, "nothing was rolled back")
}
