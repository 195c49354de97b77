package pages

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/auth"
)

// TestTokenFormRequiresExpiry: the token form offers no token that never
// expires (90 days preselected); a lifetime over the maximum or none at all
// is refused naming the field, and nothing is created.
func TestTokenFormRequiresExpiry(t *testing.T) {
	h := newHarness(t, nil)
	sid, csrf := h.session("otto")
	resp, body := h.do("GET", "/account", sid, "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotContains(t, body, `<option value="0">`)
	require.Contains(t, body, `<option value="2160h" selected>90 days</option>`)

	resp, body = h.do("POST", "/account/tokens", sid, csrf, url.Values{"label": {"ci"}, "scope": {"operator"}, "ttl": {"9000h"}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "ttl: must be at most 365 days")
	resp, body = h.do("POST", "/account/tokens", sid, csrf, url.Values{"label": {"ci"}, "scope": {"operator"}, "ttl": {"0"}})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, body, "ttl: must be a positive duration")
	toks, err := h.auth.Tokens(context.Background(), "otto")
	require.NoError(t, err)
	require.Empty(t, toks, "nothing created")
}

// TestTokenWithoutExpiryFlagged: a token from before expiry was required
// is flagged on the account page for replacement.
func TestTokenWithoutExpiryFlagged(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	sid, _ := h.session("otto")
	u, err := h.auth.User(ctx, "otto")
	require.NoError(t, err)
	_, tok, err := h.auth.CreateToken(ctx, &auth.Principal{User: u, Roles: u.Roles}, "otto", "old", []versioning.Role{versioning.RoleOperator}, time.Hour)
	require.NoError(t, err)
	_, err = h.db.ExecContext(ctx, `UPDATE ui_tokens SET expires_ms = 0 WHERE id = ?`, tok.ID)
	require.NoError(t, err)
	resp, body := h.do("GET", "/account", sid, "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "never: replace it")
}

// TestTokenFormLifetimesWithinMaximum: the form offers only lifetimes the
// configured maximum allows, the default selected.
func TestTokenFormLifetimesWithinMaximum(t *testing.T) {
	const day = 24 * time.Hour
	tests := []struct {
		name     string
		def, max time.Duration
		want     []string
	}{
		{"defaults", 90 * day, 365 * day, []string{"168h", "720h", "2160h*", "8760h"}},
		{"max 30 days", 30 * day, 30 * day, []string{"168h", "720h*"}},
		{"default between", 14 * day, 90 * day, []string{"168h", "336h*", "720h", "2160h"}},
		{"default above all", 400 * day, 500 * day, []string{"168h", "720h", "2160h", "8760h", "9600h*"}},
		{"max below all", 3 * day, 3 * day, []string{"72h*"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, c := range ttlChoices(tt.def, tt.max) {
				v := c.Value
				if c.Selected {
					v += "*"
				}
				got = append(got, v)
			}
			require.Equal(t, tt.want, got)
		})
	}
}

// TestAccountPageShowsExpiredTokensAsExpired: a token past its expiry is
// not shown as active, and offers no revoke button.
func TestAccountPageShowsExpiredTokensAsExpired(t *testing.T) {
	h := newHarness(t, nil)
	_, tok := h.tokenFor("otto", "short-lived", time.Hour)
	h.clk.Advance(2 * time.Hour)
	sid, _ := h.session("otto")
	resp, body := h.do("GET", "/account", sid, "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, "<td>expired</td>")
	require.NotContains(t, body, "<td>active</td>")
	require.NotContains(t, body, "/account/tokens/"+tok.ID+"/revoke")
}

// TestTokenFormLabelsLifetimesInDays: every lifetime the token form offers
// is labelled in days, as the error for one over the maximum names it.
func TestTokenFormLabelsLifetimesInDays(t *testing.T) {
	const day = 24 * time.Hour
	var got []string
	for _, c := range ttlChoices(14*day, 365*day) {
		got = append(got, c.Label)
	}
	require.Equal(t, []string{"7 days", "14 days", "30 days", "90 days", "365 days"}, got)
}
