package auth

import (
	"context"
	"database/sql"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
	_ "modernc.org/sqlite"

	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
)

// TestThrottledAttemptsPushNoNamesIntoTheThrottle: the throttle remembers
// a bounded number of keys, least recently used first out. A client over
// its limit posting fresh names must not add them, or it would push out
// another user's spent bucket and win that user a fresh burst of guesses.
func TestThrottledAttemptsPushNoNamesIntoTheThrottle(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", ":memory:")
	require.NoError(t, err)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:", Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	m, err := New(ctx, Options{DB: db, Dialect: migrations.SQLite, Auditor: st, Clock: clk, BcryptCost: bcrypt.MinCost, LoginRate: 6, LoginBurst: 3})
	require.NoError(t, err)
	for i := range 1000 {
		_, _, _ = m.Login(ctx, "name"+strconv.Itoa(i), "wrong password", "10.0.0.2")
	}
	// The address and the three names its burst allowed.
	require.Equal(t, 4, m.throttle.Len())
}

// TestIPv6ClientIsItsSlashSixtyFour: a host given an IPv6 /64 must not get
// a fresh address bucket for each of its addresses (password spraying
// across many names from one host).
func TestIPv6ClientIsItsSlashSixtyFour(t *testing.T) {
	for _, tc := range []struct{ addr, key string }{
		{"2001:db8:1:2::1", "addr:2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff:1:2:3", "addr:2001:db8:1:2::/64"},
		{"10.0.0.1", "addr:10.0.0.1"},
		{"::ffff:10.0.0.1", "addr:::ffff:10.0.0.1"},
		{"not an address", "addr:not an address"},
	} {
		require.Equal(t, tc.key, throttleAddr(tc.addr), tc.addr)
	}
}

// TestKnownSourcesBounded: the memory of addresses users logged in from
// stays within its bound, dropping expired entries first.
func TestKnownSourcesBounded(t *testing.T) {
	const maxKnownSources = 1000
	k := newKnownSources(maxKnownSources)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range maxKnownSources {
		k.add("old", strconv.Itoa(i), start)
	}
	later := start.Add(knownSourceTTL + time.Second)
	require.False(t, k.has("old", "0", later))
	k.add("new", "a", later)
	require.Equal(t, 1, len(k.m), "expired entries make way first")
	for i := range maxKnownSources + 10 {
		k.add("user", strconv.Itoa(i), later)
	}
	require.LessOrEqual(t, len(k.m), maxKnownSources)
}
