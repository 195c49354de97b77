package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/api"
	"governor.dev/governor/ui/model"
)

// auditFails is a rules store whose RecordAudit fails while fail is set.
type auditFails struct {
	versioning.Store
	fail error
}

func (s *auditFails) RecordAudit(ctx context.Context, rec versioning.AuditRecord) (versioning.AuditEntry, error) {
	if s.fail != nil {
		return versioning.AuditEntry{}, s.fail
	}
	return s.Store.RecordAudit(ctx, rec)
}

// TestCanaryActionWithoutItsAuditEntrySaysSo: a canary action that took
// effect answers its success even when its audit entry cannot be written
// (the action is not undone), and the answer says in audit_error that the
// audit log does not show it, with as much of the reason as may be shown; the
// failure is logged. Written entries carry the canary actions' names.
func TestCanaryActionWithoutItsAuditEntrySaysSo(t *testing.T) {
	ctx := context.Background()
	var logs bytes.Buffer
	var st *auditFails
	e := newDecideEnv(t, 1, func(o *api.Options) {
		st = &auditFails{Store: o.Rules}
		o.Rules, o.Rollouts, o.Logger = st, model.NewMemoryRollouts(), slog.New(slog.NewTextHandler(&logs, nil))
	})
	v := e.propose(t, 100)
	_, err := e.st.Approve(ctx, "bank", v.Number, bob, "ok")
	require.NoError(t, err)
	post := func(path, body string) (int, map[string]any) {
		t.Helper()
		r := httptest.NewRequest("POST", "/api/v1/services/bank/"+path, strings.NewReader(body))
		r.Header.Set(testUser, "carol")
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, r)
		var out map[string]any
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &out), w.Body.String())
		return w.Code, out
	}
	staged := fmt.Sprintf(`{"version": %d}`, v.Number)

	st.fail = fmt.Errorf("%w: connection refused", versioning.ErrUnavailable)
	code, out := post("canary", fmt.Sprintf(`{"version": %d, "percent": 10}`, v.Number))
	require.Equal(t, http.StatusCreated, code, out)
	require.Equal(t, "the action took effect, but its audit entry could not be written (the database is unavailable): "+
		"the audit log does not show it; do not repeat it", out["audit_error"])
	require.Contains(t, logs.String(), "api: canary audit entry not written")
	require.Contains(t, logs.String(), "connection refused")

	st.fail = errors.New("disk I/O error")
	code, out = post("canary/abort", staged)
	require.Equal(t, http.StatusOK, code, out)
	require.Contains(t, out["audit_error"], "(an internal error; it has been logged)")
	require.NotContains(t, out["audit_error"], "disk I/O", "internal detail stays in the log")

	st.fail = nil
	code, out = post("canary", fmt.Sprintf(`{"version": %d, "percent": 50}`, v.Number))
	require.Equal(t, http.StatusCreated, code, out)
	require.NotContains(t, out, "audit_error")
	code, out = post("canary/promote", staged)
	require.Equal(t, http.StatusOK, code, out)
	require.NotContains(t, out, "audit_error")

	entries, err := st.Audit(ctx, versioning.AuditFilter{Service: "bank", Limit: 100})
	require.NoError(t, err)
	var actions []versioning.Action
	for _, e := range entries {
		if strings.HasPrefix(string(e.Action), "canary_") {
			actions = append(actions, e.Action)
		}
	}
	require.ElementsMatch(t, []versioning.Action{model.ActionCanaryStart, model.ActionCanaryPromote}, actions)
}
