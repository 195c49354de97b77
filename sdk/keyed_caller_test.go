package governor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/rules"
)

// TestKeyRateLimitOnTheCallerHeaderKeysRequestCaller: a per-key limit keyed
// on the route's caller header (X-Caller, or the exemption's CallerHeader)
// limits by Request.Caller when it is set, over the header, as caller
// exemptions do; a transport that names the caller in Caller (from an mTLS
// identity, say) gets its per-caller limits. Other header keys ignore it.
func TestKeyRateLimitOnTheCallerHeaderKeysRequestCaller(t *testing.T) {
	for _, tt := range []struct {
		name    string
		key     string
		exempt  *rules.Exempt
		header  mapHeader
		limited bool // the second request of caller svc-a is refused
	}{
		{"default caller header, no header", "header:X-Caller", nil, nil, true},
		{"Caller wins over the header", "header:x-caller", nil, mapHeader{"X-Caller": "changes"}, true},
		{"exemption's caller header", "header:X-Service", &rules.Exempt{Callers: []string{"probe"}, CallerHeader: "x-service"}, nil, true},
		{"another header", "header:X-Api-Key", nil, nil, false},
		{"X-Caller when the caller header is another", "header:X-Caller", &rules.Exempt{Callers: []string{"probe"}, CallerHeader: "X-Service"}, nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := route("api", "/")
			r.KeyRateLimits = []rules.KeyRateLimit{{Key: tt.key, Rate: 1, Burst: 1}}
			r.Exempt = tt.exempt
			f := newFixture(t, 1, ruleset(r))
			admit := func(n int) error {
				h := mapHeader{}
				for k, v := range tt.header {
					h[k] = v + string(rune('0'+n))
				}
				p, err := f.g.Admit(context.Background(), governor.Request{Path: "/", Caller: "svc-a", Header: h})
				p.Release(time.Millisecond, governor.Success)
				return err
			}
			if err := admit(1); err != nil {
				t.Fatalf("first request: %v", err)
			}
			err := admit(2)
			if limited := errors.Is(err, governor.ErrRateLimited); limited != tt.limited {
				t.Fatalf("second request of caller svc-a: %v, want rate limited %v", err, tt.limited)
			}
		})
	}
}
