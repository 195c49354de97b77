package governor_test

import (
	"context"
	"testing"
	"time"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/rules"
)

// FuzzAdmit: whatever a client sends (path, method, priority, user, caller,
// key headers), admission never panics, a refusal is always a *Rejection, and
// once every permit is released nothing stays in flight.
func FuzzAdmit(f *testing.F) {
	f.Add("/api/orders", "GET", "3", "user-1", "prober", "10.0.0.1", "key")
	f.Add("/", "", "", "", "", "", "")
	f.Add("/healthz", "POST", "critical", "", "", "::1", "")
	f.Add("/api", "DELETE", " 9 ", "\x00", "x", "[::1]", "k\xff")
	api := route("api", "/api")
	api.Match.Methods = []string{"GET", "POST"}
	api.Concurrency = &rules.Concurrency{Algorithm: rules.AlgorithmFixed, Max: 3}
	api.Shedding = &rules.Shedding{ConsistentUsers: true}
	api.RateLimit = &rules.RateLimit{Rate: 5, Burst: 4}
	api.KeyRateLimits = []rules.KeyRateLimit{{Key: "ip", Rate: 2, Burst: 2, MaxKeys: 32}, {Key: "header:X-Key", Rate: 2, Burst: 1}}
	api.Exempt = &rules.Exempt{Paths: []string{"/healthz"}, Callers: []string{"prober"}}
	all := concRoute(2, 0.5)
	all.Name = "all"
	all.Mode = rules.ModeShadow
	rs := ruleset(api, all)
	rs.Priority = &rules.Priority{UserHeader: "X-User", Aliases: map[string]rules.Class{"vip": rules.ClassCritical}}
	fx := newFixture(f, 2, rs)
	f.Fuzz(func(t *testing.T, path, method, prio, user, caller, ip, key string) {
		var held []governor.Permit
		for i := range 6 {
			req := governor.Request{Path: path, Method: method, ClientIP: ip, Caller: caller,
				Header: mapHeader{"X-Traffic-Priority": prio, "X-User": user, "X-Key": key}}
			if i%2 == 1 {
				req.Priority, req.User = prio, user
			}
			p, err := fx.g.Admit(context.Background(), req)
			if err != nil {
				if _, ok := err.(*governor.Rejection); !ok {
					t.Fatalf("refusal of type %T: %v", err, err)
				}
				continue
			}
			held = append(held, p)
		}
		for _, p := range held {
			p.Release(time.Millisecond, governor.Success)
		}
		fx.clk.Advance(time.Second)
		for _, r := range []string{"api", "all"} {
			if n := fx.g.InFlight(r); n != 0 {
				t.Fatalf("route %s has %d in flight after every release", r, n)
			}
		}
	})
}
