package pages

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/auth"
)

// unverifiable is a rules store whose audit chain cannot be read for its
// check (the database timed out), or reads as broken.
type unverifiable struct {
	versioning.Store
	err error
}

func (u unverifiable) VerifyAudit(context.Context) (versioning.AuditReport, error) {
	return versioning.AuditReport{}, u.err
}

// TestAuditPageTellsAnUncheckedChainFromABrokenOne: a database that did not
// answer the chain's check is not shown as "Chain verification failed",
// which reads as tampering; a broken chain still is.
func TestAuditPageTellsAnUncheckedChainFromABrokenOne(t *testing.T) {
	for _, c := range []struct {
		name      string
		err       error
		want, not string
	}{
		{"store timed out", errors.New("context deadline exceeded"), "could not be checked now", "Chain verification failed"},
		{"chain broken", &versioning.ChainError{Seq: 7, Problem: "hash mismatch"}, "Chain verification failed", "could not be checked now"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, func(o *Options) { o.Rules = unverifiable{Store: o.Rules, err: c.err} })
			sid, _ := h.session("alice")
			resp, body := h.do("GET", "/audit", sid, "", nil)
			require.Equal(t, http.StatusOK, resp.StatusCode, body)
			require.Contains(t, body, c.want)
			require.NotContains(t, body, c.not)
		})
	}
}

// TestAuditPageVerifiesNewEntriesBetweenWholeWalks: the first view walks
// the whole chain; a later one verifies only the entries appended since
// and says when the whole chain was verified and when it will be again;
// "Verify the whole chain now" walks it at once.
func TestAuditPageVerifiesNewEntriesBetweenWholeWalks(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	sid, _ := h.session("alice")
	_, body := h.do("GET", "/audit", sid, "", nil)
	rep, err := h.store.VerifyAudit(ctx)
	require.NoError(t, err)
	require.Contains(t, body, fmt.Sprintf("Whole chain verified now: %d entries", rep.Entries))
	require.Contains(t, body, `<a href="/audit?verify=whole">Verify the whole chain now</a>`)

	for i := range 2 {
		_, err := h.store.RecordAudit(ctx, versioning.AuditRecord{Actor: versioning.Actor{Name: "carol"}, Action: "test.entry",
			Detail: []byte(fmt.Sprintf(`{"i":%d}`, i))})
		require.NoError(t, err)
	}
	h.clk.Advance(time.Minute)
	_, body = h.do("GET", "/audit?action=test.entry", sid, "", nil)
	require.Contains(t, body, fmt.Sprintf("Whole chain verified at 2026-03-01 09:00:00 UTC, %d entries; 2 new entries verified now", rep.Entries))
	require.Contains(t, body, "at the latest at 2026-03-01 09:10:00 UTC")
	require.Contains(t, body, `<a href="/audit?action=test.entry&amp;verify=whole">Verify the whole chain now</a>`)

	_, body = h.do("GET", "/audit?action=test.entry&verify=whole", sid, "", nil)
	require.Contains(t, body, fmt.Sprintf("Whole chain verified now: %d entries", rep.Entries+2))
}

// TestAuditFilterOffersEveryAccountAction: the account actions the auth
// package audits can be picked in the audit page's filter, password
// changes among them.
func TestAuditFilterOffersEveryAccountAction(t *testing.T) {
	h := newHarness(t, nil)
	sid, _ := h.session("alice")
	resp, body := h.do("GET", "/audit", sid, "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	for _, a := range []versioning.Action{versioning.ActionLogin, versioning.ActionLoginFailure, versioning.ActionLogout,
		versioning.ActionTokenCreate, versioning.ActionTokenRevoke, auth.ActionUserCreate, auth.ActionUserRoles,
		auth.ActionUserDelete, auth.ActionAdminRecover, auth.ActionPasswordChange} {
		require.Contains(t, body, fmt.Sprintf(">%s</option>", a), "the filter does not offer %s", a)
	}
}
