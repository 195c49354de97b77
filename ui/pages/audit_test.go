package pages

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
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
