package httperr_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/internal/httperr"
	"governor.dev/governor/ui/model"
)

func TestStatus(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		public bool
	}{
		{versioning.ErrNotFound, 404, true},
		{versioning.ErrConflict, 409, true},
		{versioning.ErrSelfApproval, 403, true},
		{versioning.ErrForbidden, 403, true},
		{versioning.ErrInvalidState, 409, true},
		{&versioning.InputError{}, 422, true},
		{versioning.ErrUnavailable, 503, false},
		{auth.ErrUnauthenticated, 401, true},
		{auth.ErrCSRF, 403, true},
		{auth.ErrThrottled, 429, true},
		{auth.ErrUnavailable, 503, false},
		{model.ErrInvalid, 422, true},
		{model.ErrNotFound, 404, true},
		{httperr.ErrBadRequest, 400, true},
		{errors.New("pq: relation does not exist"), 500, false},
	} {
		wrapped := fmt.Errorf("context: %w", tc.err)
		status, public := httperr.Status(wrapped)
		require.Equal(t, tc.status, status, "%v", tc.err)
		require.Equal(t, tc.public, public, "%v", tc.err)
	}
}

func TestWriteHidesInternals(t *testing.T) {
	for _, path := range []string{"/api/v1/x", "/page"} {
		w := httptest.NewRecorder()
		httperr.Write(w, httptest.NewRequest("GET", path, nil), nil, fmt.Errorf("%w: dial tcp 10.1.2.3:5432: secret", versioning.ErrUnavailable))
		require.Equal(t, http.StatusServiceUnavailable, w.Code)
		require.NotContains(t, w.Body.String(), "10.1.2.3")
		require.Contains(t, w.Body.String(), "A backend is unavailable")
	}
	w := httptest.NewRecorder()
	err := &versioning.InputError{Errors: []rules.FieldError{{Field: "reason", Problem: "required"}}}
	httperr.Write(w, httptest.NewRequest("POST", "/api/v1/x", nil), nil, err)
	var body httperr.Body
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
	require.Equal(t, 422, body.Status)
	require.Equal(t, "reason", body.Fields[0].Field)
}

// TestMessageOfLastAdminAndOversizedBody: the last-admin refusal is shown
// without the package's prefix; a body over its limit is 413 naming it.
func TestMessageOfLastAdminAndOversizedBody(t *testing.T) {
	err := fmt.Errorf("%w: roles: removing the admin role from the only admin %q would leave nobody to manage users", auth.ErrLastAdmin, "ada")
	status, _ := httperr.Status(err)
	require.Equal(t, http.StatusUnprocessableEntity, status)
	require.Equal(t, `roles: removing the admin role from the only admin "ada" would leave nobody to manage users`, httperr.Message(err))

	big := fmt.Errorf("api: body: %w", &http.MaxBytesError{Limit: 2 << 20})
	status, public := httperr.Status(big)
	require.Equal(t, http.StatusRequestEntityTooLarge, status)
	require.True(t, public)
	require.Equal(t, "request body too large: at most 2097152 bytes (2 MiB)", httperr.Message(big))
}

// TestReasonSaysWhatMayBeShown: the reason something (an audit entry) was
// not done is the error's own text when it may be shown, else its kind,
// never words inviting a retry (which would repeat the action).
func TestReasonSaysWhatMayBeShown(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: connection refused", versioning.ErrUnavailable), "the database is unavailable"},
		{&versioning.ChainError{Seq: 7, Problem: "hash mismatch"}, (&versioning.ChainError{Seq: 7, Problem: "hash mismatch"}).Error()},
		{fmt.Errorf("pq: relation missing"), "an internal error; it has been logged"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, httperr.Reason(tt.err))
	}
}
