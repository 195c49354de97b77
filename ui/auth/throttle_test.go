package auth_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/auth"
)

func heapAlloc() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestLoginThrottleRetainsNoHugeNames: the user name of a login is the
// client's, as long as the body allows (2 MiB through the pages); the
// throttle, which remembers up to 100,000 names, must not keep it whole, or
// anonymous requests fill the memory.
func TestLoginThrottleRetainsNoHugeNames(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pad := strings.Repeat("x", 1<<20)
	before := heapAlloc()
	for i := range 48 {
		_, _, err := e.m.Login(ctx, strconv.Itoa(i)+pad, "whatever password", "10.0.0."+strconv.Itoa(i))
		require.ErrorIs(t, err, auth.ErrUnauthenticated)
	}
	grown := heapAlloc() - before
	runtime.KeepAlive(e.m)
	require.Less(t, grown, int64(8<<20), "48 attempts with 1 MiB names kept %d MiB", grown>>20)
}

// TestChangePasswordThrottledLikeLogin: a session left open must not be a
// way around the login throttle to guess the user's password.
func TestChangePasswordThrottledLikeLogin(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	_, err := e.m.CreateUser(ctx, "ann", "correct horse battery", operator, false)
	require.NoError(t, err)
	s, _, err := e.m.Login(ctx, "ann", "correct horse battery", "10.0.0.1")
	require.NoError(t, err)
	throttled := 0
	for i := range 10 {
		_, err = e.m.ChangePassword(ctx, "ann", "guess number "+strconv.Itoa(i), "a brand new password", s)
		if errors.Is(err, auth.ErrThrottled) {
			throttled++
			continue
		}
		require.ErrorIs(t, err, auth.ErrInvalid)
	}
	require.Equal(t, 7, throttled, "burst 3")
	_, err = e.m.ChangePassword(ctx, "ann", "correct horse battery", "a brand new password", s)
	require.ErrorIs(t, err, auth.ErrThrottled, "not even the right password gets through")
	e.clk.Advance(10 * time.Second) // 6 per minute
	_, err = e.m.ChangePassword(ctx, "ann", "correct horse battery", "a brand new password", s)
	require.NoError(t, err)
}

// TestBearerSchemeCaseInsensitive: the Authorization scheme name is
// case-insensitive (RFC 9110); clients that send "bearer" are not refused.
func TestBearerSchemeCaseInsensitive(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	u, err := e.m.CreateUser(ctx, "bot", "correct horse battery", operator, false)
	require.NoError(t, err)
	secret, _, err := e.m.CreateToken(ctx, &auth.Principal{User: u, Roles: u.Roles}, "bot", "ci", operator, 0)
	require.NoError(t, err)
	var gotErr error
	onErr := func(w http.ResponseWriter, _ *http.Request, err error) { gotErr = err; w.WriteHeader(499) }
	h := e.m.Middleware(onErr)(auth.Require(onErr, versioning.RoleOperator)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "bot", auth.FromContext(r.Context()).User.Name)
		w.WriteHeader(http.StatusNoContent)
	})))
	for _, tc := range []struct {
		header string
		code   int
	}{
		{"Bearer " + secret, http.StatusNoContent},
		{"bearer " + secret, http.StatusNoContent},
		{"BEARER  " + secret, http.StatusNoContent},
		{"Basic " + secret, 499},
		{"Bearer", 499},
		{"Bearer" + secret, 499},
	} {
		gotErr = nil
		r := httptest.NewRequest("GET", "/api/v1/overview", nil)
		r.Header.Set("Authorization", tc.header)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		require.Equal(t, tc.code, w.Code, "%q: %v", tc.header, gotErr)
		if tc.code == 499 {
			require.ErrorIs(t, gotErr, auth.ErrUnauthenticated)
		}
	}
}

// TestThrottledLoginsAreAuditedOncePerAddressAMinute: a refused (throttled)
// login costs the attacker nothing, so auditing each one let anyone grow the
// hash-chained audit log, a serialized write apiece, as fast as they could
// post. The first throttled attempt of an address in a minute is audited;
// the rest are not, until the next minute.
func TestThrottledLoginsAreAuditedOncePerAddressAMinute(t *testing.T) {
	e := newEnv(t) // burst 3
	ctx := context.Background()
	throttledRows := func() int {
		entries, err := e.store.Audit(ctx, versioning.AuditFilter{})
		require.NoError(t, err)
		n := 0
		for _, en := range entries {
			if strings.Contains(string(en.Detail), "throttled") {
				n++
			}
		}
		return n
	}
	for i := range 200 {
		_, _, _ = e.m.Login(ctx, "ann"+strconv.Itoa(i), "wrong password!!", "10.0.0.9")
	}
	require.Equal(t, 1, throttledRows(), "200 attempts, all but 3 throttled, in one minute")
	e.clk.Advance(time.Minute)
	for i := range 50 {
		_, _, _ = e.m.Login(ctx, "bob"+strconv.Itoa(i), "wrong password!!", "10.0.0.9")
	}
	require.Equal(t, 2, throttledRows(), "a minute later")
}

// TestLoginFromOneIPv6BlockThrottledAsOneClient: logins for many names
// from the addresses of one /64 share the address's limit.
func TestLoginFromOneIPv6BlockThrottledAsOneClient(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for i := range 3 {
		_, _, err := e.m.Login(ctx, "user"+strconv.Itoa(i), "x", "2001:db8:1:2::"+strconv.Itoa(i+1))
		require.ErrorIs(t, err, auth.ErrUnauthenticated)
	}
	_, _, err := e.m.Login(ctx, "user9", "x", "2001:db8:1:2:abcd::9")
	require.ErrorIs(t, err, auth.ErrThrottled)
	_, _, err = e.m.Login(ctx, "user9", "x", "2001:db8:1:3::1")
	require.ErrorIs(t, err, auth.ErrUnauthenticated, "another /64 is another client")
}

// TestLoginGuesserCannotShutOutUserForever: a guesser posting at the rate
// its own address is allowed keeps the name's bucket spent for as long as
// it keeps at it; the user still logs in from an address they logged in
// from before, while the guesser's address stays throttled.
func TestLoginGuesserCannotShutOutUserForever(t *testing.T) {
	e := newEnv(t) // 6 a minute, burst 3
	ctx := context.Background()
	const pw = "correct horse battery"
	_, err := e.m.CreateUser(ctx, "admin", pw, operator, false)
	require.NoError(t, err)
	_, _, err = e.m.Login(ctx, "admin", pw, "10.0.0.5")
	require.NoError(t, err)
	for i := range 60 {
		e.clk.Advance(10 * time.Second)
		for range 3 {
			_, _, _ = e.m.Login(ctx, "admin", "guess guess guess", "192.0.2.66")
		}
		if i%10 == 9 {
			_, _, err = e.m.Login(ctx, "admin", pw, "10.0.0.5")
			require.NoError(t, err, "minute %d", i/6)
			_, _, err = e.m.Login(ctx, "admin", pw, "192.0.2.66")
			require.ErrorIs(t, err, auth.ErrThrottled)
			_, _, err = e.m.Login(ctx, "admin", pw, "198.51.100.7")
			require.ErrorIs(t, err, auth.ErrThrottled, "an address never used by the user gets no way around the name's limit")
		}
	}
}
