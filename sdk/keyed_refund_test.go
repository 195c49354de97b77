package governor_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/rules"
)

// TestRequestsRefusedByAPerKeyLimitLeaveTheRouteRateToOthers: one client far
// over its per-IP limit must not use up the route's rate, nor that of an
// earlier per-key limit it shares with others: its refused requests give
// back the tokens the earlier stages took, so other clients keep them.
func TestRequestsRefusedByAPerKeyLimitLeaveTheRouteRateToOthers(t *testing.T) {
	r := route("api", "/")
	r.RateLimit = &rules.RateLimit{Rate: 10, Burst: 10}
	r.KeyRateLimits = []rules.KeyRateLimit{
		{Key: "header:X-Api-Key", Rate: 10, Burst: 10},
		{Key: "ip", Rate: 1, Burst: 1},
	}
	f := newFixture(t, 1, ruleset(r))
	admit := func(ip string) error {
		p, err := f.g.Admit(context.Background(), governor.Request{Path: "/", ClientIP: ip, Header: mapHeader{"X-Api-Key": "shared"}})
		p.Release(time.Millisecond, governor.Success)
		return err
	}
	if err := admit("10.0.0.1"); err != nil {
		t.Fatalf("noisy client's first request: %v", err)
	}
	for i := range 50 {
		if err := admit("10.0.0.1"); !errors.Is(err, governor.ErrRateLimited) {
			t.Fatalf("noisy client's request %d: %v, want rate limited", i+2, err)
		}
	}
	// Nine tokens are left in the route's bucket, and nine in the shared
	// API key's: the per-IP refusals gave back what the earlier stages took.
	for i := range 9 {
		if err := admit(fmt.Sprintf("10.0.1.%d", i)); err != nil {
			t.Fatalf("client %d: %v, want admitted (the noisy client's refused requests used up the route's rate)", i, err)
		}
	}
	if err := admit("10.0.2.1"); !errors.Is(err, governor.ErrRateLimited) {
		t.Fatalf("eleventh request in the second: %v, want the route's rate limit", err)
	}
}
