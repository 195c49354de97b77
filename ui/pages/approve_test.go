package pages

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
)

// TestApprovalSubmittedTwiceStandsAndSaysSo: a second click on Approve (or a
// resent form) of an approval the first click made answers as the first
// did, instead of an error banner ("not proposed") that reads as if the
// approval failed; someone else's refused approval still shows its error.
func TestApprovalSubmittedTwiceStandsAndSaysSo(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	alice := versioning.Actor{Name: "alice", Roles: harnessUsers["alice"]}
	v, err := h.store.Propose(ctx, versioning.Proposal{Ruleset: harnessRuleset("checkout", 100), Author: alice, Reason: "first limits"})
	require.NoError(t, err)
	bob, bobCSRF := h.session("bob")
	form := url.Values{"checksum": {v.Checksum}, "comment": {"ok"}}
	for range 2 {
		resp, body := h.do("POST", "/services/checkout/rules/1/approve", bob, bobCSRF, form)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
		require.Equal(t, "/services/checkout/rules/1", resp.Header.Get("Location"))
	}
	cur, err := h.store.Get(ctx, "checkout", 1)
	require.NoError(t, err)
	require.Len(t, cur.Approvals, 1, "one approval")

	otto, ottoCSRF := h.session("otto")
	resp, _ := h.do("POST", "/services/checkout/rules/1/approve", otto, ottoCSRF, form)
	require.NotEqual(t, http.StatusSeeOther, resp.StatusCode, "another person's refused approval is not taken for theirs")
}

// TestResentApprovalOfAVersionRejectedSinceShowsTheRefusal: a resent
// approval form is taken for the approval it repeats only while that
// approval stands: once someone else rejected the version, or when the form
// says something else (another comment), the page shows the store's refusal
// instead of answering as if the approval had gone through.
func TestResentApprovalOfAVersionRejectedSinceShowsTheRefusal(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	_, err := h.store.SetPolicy(ctx, versioning.Policy{Service: "checkout", ApprovalsRequired: 2},
		versioning.Actor{Name: "root", Roles: []versioning.Role{versioning.RoleAdmin}})
	require.NoError(t, err)
	otto := versioning.Actor{Name: "otto", Roles: harnessUsers["otto"]}
	v, err := h.store.Propose(ctx, versioning.Proposal{Ruleset: harnessRuleset("checkout", 100), Author: otto, Reason: "first limits"})
	require.NoError(t, err)
	bob, bobCSRF := h.session("bob")
	form := url.Values{"checksum": {v.Checksum}, "comment": {"ok"}}
	resp, body := h.do("POST", "/services/checkout/rules/1/approve", bob, bobCSRF, form)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)

	resp, body = h.do("POST", "/services/checkout/rules/1/approve", bob, bobCSRF, url.Values{"checksum": {v.Checksum}, "comment": {"really ok"}})
	require.NotEqual(t, http.StatusSeeOther, resp.StatusCode, "another comment is not the approval recorded")
	require.Contains(t, body, "already approved", body)

	_, err = h.store.Reject(ctx, "checkout", 1, versioning.Actor{Name: "alice", Roles: harnessUsers["alice"]}, "no")
	require.NoError(t, err)
	resp, body = h.do("POST", "/services/checkout/rules/1/approve", bob, bobCSRF, form)
	require.NotEqual(t, http.StatusSeeOther, resp.StatusCode, "the approval no longer stands: the version was rejected")
	require.Contains(t, body, "banner-error")
}

// TestRejectionAndWithdrawalSubmittedTwiceStand: a second click on Reject
// or Withdraw answers as the first did while the decision stands as the
// form made it; another person's, or another comment, shows the refusal.
func TestRejectionAndWithdrawalSubmittedTwiceStand(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	otto := versioning.Actor{Name: "otto", Roles: harnessUsers["otto"]}
	for i, tt := range []struct{ kind, user, other string }{{"reject", "bob", "alice"}, {"withdraw", "otto", ""}} {
		n := int64(i + 1)
		_, err := h.store.Propose(ctx, versioning.Proposal{BaseVersion: 0, Ruleset: harnessRuleset("checkout", float64(100+i)), Author: otto, Reason: "limits"})
		require.NoError(t, err)
		path := fmt.Sprintf("/services/checkout/rules/%d/%s", n, tt.kind)
		sid, csrf := h.session(tt.user)
		form := url.Values{"comment": {"no"}}
		for range 2 {
			resp, body := h.do("POST", path, sid, csrf, form)
			require.Equal(t, http.StatusSeeOther, resp.StatusCode, "%s: %s", tt.kind, body)
			require.Equal(t, fmt.Sprintf("/services/checkout/rules/%d", n), resp.Header.Get("Location"))
		}
		resp, body := h.do("POST", path, sid, csrf, url.Values{"comment": {"changed my mind"}})
		require.NotEqual(t, http.StatusSeeOther, resp.StatusCode, "%s with another comment: %s", tt.kind, body)
		require.Contains(t, body, "banner-error")
		if tt.other != "" {
			osid, ocsrf := h.session(tt.other)
			resp, body = h.do("POST", path, osid, ocsrf, form)
			require.NotEqual(t, http.StatusSeeOther, resp.StatusCode, "another person's %s: %s", tt.kind, body)
		}
	}
}

// TestRebaseSubmittedTwiceStands: a second click on Rebase (or a resent
// form) of a rebase the first click made answers as the first did, with
// the version it made, and writes nothing; once that version changed (here
// it went live), the page shows the store's refusal.
func TestRebaseSubmittedTwiceStands(t *testing.T) {
	h := newHarness(t, nil)
	h.liveV2()
	ctx := context.Background()
	otto := versioning.Actor{Name: "otto", Roles: harnessUsers["otto"]}
	alice := versioning.Actor{Name: "alice", Roles: harnessUsers["alice"]}
	bob := versioning.Actor{Name: "bob", Roles: harnessUsers["bob"]}
	_, err := h.store.Propose(ctx, versioning.Proposal{BaseVersion: 2, Ruleset: harnessRuleset("checkout", 180), Author: otto, Reason: "more"})
	require.NoError(t, err)
	other, err := h.store.Propose(ctx, versioning.Proposal{BaseVersion: 2, Ruleset: harnessRuleset("checkout", 160), Author: alice, Reason: "other"})
	require.NoError(t, err)
	_, err = h.store.Approve(ctx, "checkout", other.Number, bob, "")
	require.NoError(t, err)

	sid, csrf := h.session("otto")
	path := "/services/checkout/rules/3/rebase"
	resp, body := h.do("POST", path, sid, csrf, url.Values{})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	require.Equal(t, "/services/checkout/rules/5", resp.Header.Get("Location"))
	entries, err := h.store.Audit(ctx, versioning.AuditFilter{Service: "checkout", Limit: 1000})
	require.NoError(t, err)

	resp, body = h.do("POST", path, sid, csrf, url.Values{})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "resent: %s", body)
	require.Equal(t, "/services/checkout/rules/5", resp.Header.Get("Location"))
	again, err := h.store.Audit(ctx, versioning.AuditFilter{Service: "checkout", Limit: 1000})
	require.NoError(t, err)
	require.Len(t, again, len(entries), "nothing written twice")
	_, err = h.store.Get(ctx, "checkout", 6)
	require.ErrorIs(t, err, versioning.ErrNotFound, "no second rebased version")

	asid, acsrf := h.session("alice")
	resp, body = h.do("POST", path, asid, acsrf, url.Values{})
	require.Equal(t, http.StatusConflict, resp.StatusCode, "another person's rebase: %s", body)
	require.Contains(t, body, "cannot rebase version 3 of checkout: it was already withdrawn by otto")

	_, err = h.store.Approve(ctx, "checkout", 5, bob, "")
	require.NoError(t, err)
	resp, body = h.do("POST", path, sid, csrf, url.Values{})
	require.Equal(t, http.StatusConflict, resp.StatusCode, "the rebased version went live since: %s", body)
	require.Contains(t, body, `<div class="banner banner-error"`)
	require.Contains(t, body, "cannot rebase version 3 of checkout: it was already withdrawn by otto")
}
