package auth_test

import (
	"context"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/migrations"
	"governor.dev/governor/ui/auth"
)

// TestClientAddrBehindTrustedProxies: behind a load balancer every request
// comes from the balancer's address, and the per-address login throttle
// then locked everyone out after a few failed logins by anyone. With the
// balancer's network trusted, the client is the rightmost X-Forwarded-For
// address that is not a trusted proxy; without it, X-Forwarded-For is
// ignored (a client could otherwise pick a fresh address for every guess).
func TestClientAddrBehindTrustedProxies(t *testing.T) {
	e := newEnv(t)
	trusting, err := auth.New(context.Background(), auth.Options{DB: e.db, Dialect: migrations.SQLite, Auditor: e.store, Clock: e.clk,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}})
	require.NoError(t, err)
	cases := []struct {
		remote, xff string
		plain, want string
	}{
		{"10.1.2.3:5000", "203.0.113.7", "10.1.2.3", "203.0.113.7"},
		{"10.1.2.3:5000", "198.51.100.1, 203.0.113.7, 10.9.9.9", "10.1.2.3", "203.0.113.7"}, // the client's own XFF entry is not believed
		{"192.0.2.1:5000", "203.0.113.7", "192.0.2.1", "192.0.2.1"},                         // not from a trusted proxy
		{"10.1.2.3:5000", "", "10.1.2.3", "10.1.2.3"},
		{"10.1.2.3:5000", "10.4.4.4", "10.1.2.3", "10.4.4.4"}, // every hop trusted: the leftmost
		{"10.1.2.3:5000", "not an address", "10.1.2.3", "10.1.2.3"},
		{"[::1]:5000", "2001:db8::1", "::1", "2001:db8::1"},
	}
	for _, c := range cases {
		r := httptest.NewRequest("POST", "/login", nil)
		r.RemoteAddr = c.remote
		if c.xff != "" {
			r.Header.Set("X-Forwarded-For", c.xff)
		}
		require.Equal(t, c.plain, e.m.ClientAddr(r), "no trusted proxies: %s via %q", c.remote, c.xff)
		require.Equal(t, c.want, trusting.ClientAddr(r), "trusting 10/8: %s via %q", c.remote, c.xff)
	}
}
