package pages

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
)

// TestTimelineOffersNoOlderPageWhenNoneIsLeft: a service with exactly one
// page of versions (200) has no "Older versions" link, which would lead to
// an empty page; with one more version the link is there and leads to it.
func TestTimelineOffersNoOlderPageWhenNoneIsLeft(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	admin := versioning.Actor{Name: "ada", Roles: []versioning.Role{versioning.RoleAdmin}}
	publish := func(n int) {
		for i := 0; i < n; i++ {
			_, err := h.store.EmergencyPublish(ctx, versioning.Proposal{Ruleset: harnessRuleset("checkout", float64(100+i)), Author: admin, Reason: "step"})
			require.NoError(t, err)
		}
	}
	publish(timelinePage)
	sid, _ := h.session("alice")
	resp, body := h.do("GET", "/services/checkout/rules", sid, "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `href="/services/checkout/rules/1"`, "the page holds all 200 versions")
	require.NotContains(t, body, "Older versions", "nothing is older than version 1")

	publish(1)
	_, body = h.do("GET", "/services/checkout/rules", sid, "", nil)
	require.NotContains(t, body, `href="/services/checkout/rules/1"`)
	require.Contains(t, body, `<a href="/services/checkout/rules?before=2">Older versions</a>`)
	_, body = h.do("GET", "/services/checkout/rules?before=2", sid, "", nil)
	require.Contains(t, body, `href="/services/checkout/rules/1"`)
	require.NotContains(t, body, "Older versions")
}

// TestAuditPageOffersNoOlderPageWhenNoneIsLeft: exactly one page of
// matching entries (100) has no "Older entries" link; one more has it.
func TestAuditPageOffersNoOlderPageWhenNoneIsLeft(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	record := func(from, n int) {
		for i := from; i < from+n; i++ {
			_, err := h.store.RecordAudit(ctx, versioning.AuditRecord{Actor: versioning.Actor{Name: "carol"},
				Action: "paging.test", Service: "checkout", Detail: []byte(fmt.Sprintf(`{"i":%d}`, i))})
			require.NoError(t, err)
		}
	}
	record(0, auditPage)
	sid, _ := h.session("alice")
	resp, body := h.do("GET", "/audit?action=paging.test", sid, "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, auditPage, strings.Count(body, "paging.test</td>"))
	require.NotContains(t, body, "Older entries", "every matching entry is on the page")

	record(auditPage, 1)
	_, body = h.do("GET", "/audit?action=paging.test", sid, "", nil)
	require.Contains(t, body, "Older entries")
}
