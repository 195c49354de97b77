package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/model"
)

// BenchmarkOverview1000: server time of the overview page (authentication,
// the rules store's service list, 1,000 live statuses with trends, 50 firing
// alerts, sorting and rendering) for 1,000 services. The target is under
// 100 ms per page.
func BenchmarkOverview1000(b *testing.B) {
	e := newEnvTB(b)
	ctx := context.Background()
	alice := versioning.Actor{Name: "alice", Roles: roleUsers["alice"]}
	bob := versioning.Actor{Name: "bob", Roles: roleUsers["bob"]}
	var svcs []model.ServiceStatus
	for i := range 1000 {
		name := fmt.Sprintf("svc-%04d", i)
		v, err := e.store.Propose(ctx, versioning.Proposal{Ruleset: ruleset(name, 100), Author: alice, Reason: "seed"})
		require.NoError(b, err)
		if i%10 != 0 {
			_, err = e.store.Approve(ctx, name, v.Number, bob, "")
			require.NoError(b, err)
		}
		score := float64(i%100) / 100
		trend := make([]model.Point, 30)
		for j := range trend {
			trend[j] = model.Point{Value: score * float64(j) / 30}
		}
		rate, p99 := 100+float64(i), 0.05+score/10
		svcs = append(svcs, model.ServiceStatus{Name: name, LoadScore: &score, Overloaded: score > 0.8, Trend: trend, RequestRate: &rate, P99: &p99,
			ShedByClass: map[string]float64{"sheddable": score / 10}, Rollout: model.Rollout{Synced: 38, Pending: 2}})
		if i%20 == 0 {
			e.alerts.Fire(model.Alert{ID: name, Tier: model.Tiers[i%3], Service: name, Summary: "x"})
		}
	}
	e.fleet.Set(svcs, nil)
	sid, _ := e.session("vera")
	h := e.srv.Config.Handler
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r := httptest.NewRequest("GET", "/", nil)
		r.AddCookie(&http.Cookie{Name: auth.CookieName, Value: sid})
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d", w.Code)
		}
	}
}
