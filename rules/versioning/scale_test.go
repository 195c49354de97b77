package versioning_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/internal/conformance"
	"governor.dev/governor/rules/versioning/internal/sqlstore"
	"governor.dev/governor/sdk/rules"
)

type opener struct {
	name string
	open func(tb testing.TB) conformance.Harness
}

var openers = []opener{
	{"sqlite", func(tb testing.TB) conformance.Harness { return sqliteHarness(tb, conformance.Options{}) }},
	{"postgres", func(tb testing.TB) conformance.Harness { return postgresHarness(tb, conformance.Options{}) }},
}

// seed creates n services, each with one live version, directly in SQL.
func seed(tb testing.TB, h conformance.Harness, n int) {
	tb.Helper()
	ctx := context.Background()
	const series = `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $1) `
	for _, q := range []string{
		series + `INSERT INTO rule_services (name, last_number, active_number, created_at)
			SELECT 'svc-' || i, 1, 1, CURRENT_TIMESTAMP FROM n`,
		series + `INSERT INTO rule_versions (service, number, state, content, checksum, author, source, reason, created_at, activated_at)
			SELECT 'svc-' || i, 1, 'approved', '{"service":"svc-' || i || '"}', 'sha256:seed', 'seed', 'user', 'seed',
				CURRENT_TIMESTAMP, CURRENT_TIMESTAMP FROM n`,
	} {
		require.NoError(tb, h.Exec(ctx, q, n), q)
	}
	// One service with a long history, to show its length does not matter.
	for _, q := range []string{
		series + `INSERT INTO rule_versions (service, number, state, content, checksum, author, source, reason, created_at)
			SELECT 'svc-1', i + 1, 'superseded', '{"service":"svc-1"}', 'sha256:seed', 'seed', 'user', 'seed',
				CURRENT_TIMESTAMP FROM n`,
		`UPDATE rule_services SET last_number = $1 + 1, active_number = $1 + 1 WHERE name = 'svc-1'`,
	} {
		require.NoError(tb, h.Exec(ctx, q, 1000), q)
	}
	require.NoError(tb, h.Exec(ctx, `ANALYZE`))
}

// TestActiveReadUsesIndexes proves the active-ruleset read is two index
// lookups (constant in the number of services), not a scan.
func TestActiveReadUsesIndexes(t *testing.T) {
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) {
			ctx := context.Background()
			h := o.open(t)
			seed(t, h, 10000)
			for _, svc := range []string{"svc-7777", "svc-1"} {
				v, err := h.Store.Active(ctx, svc)
				require.NoError(t, err)
				require.Equal(t, svc, v.Ruleset.Service)
				require.True(t, v.Active)
				plan := h.Plan(ctx, sqlstore.ActiveQuery, svc)
				t.Logf("plan for %s:\n%s", svc, plan)
				switch o.name {
				case "postgres":
					require.NotContains(t, plan, "Seq Scan")
					require.Contains(t, plan, "Index Scan using rule_services_pkey")
					require.Regexp(t, `Index Scan using rule_versions_pkey on rule_versions v[^\n]*\n\s+Index Cond: \(\(service = '[^']+'::text\) AND \(number = `, plan)
				case "sqlite":
					require.NotContains(t, plan, "SCAN ")
					require.Contains(t, plan, "SEARCH s USING PRIMARY KEY (name=?)")
					require.Contains(t, plan, "SEARCH v USING PRIMARY KEY (service=? AND number=?)")
				}
			}
		})
	}
}

// BenchmarkActive reads the live ruleset of a random service among 100 or
// 10,000; the two figures should be about equal.
func BenchmarkActive(b *testing.B) {
	for _, o := range openers {
		for _, n := range []int{100, 10000} {
			b.Run(fmt.Sprintf("%s/services=%d", o.name, n), func(b *testing.B) {
				ctx := context.Background()
				h := o.open(b)
				seed(b, h, n)
				var next atomic.Int64
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						i := next.Add(7919)%int64(n) + 1
						if _, err := h.Store.Active(ctx, fmt.Sprintf("svc-%d", i)); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkProposeApprove measures a full change: propose, then approve by
// a second person (version, approval, two audit entries... and the outbox
// row). Each goroutine works on its own service; the audit chain head is
// shared by all.
func BenchmarkProposeApprove(b *testing.B) {
	author := versioning.Actor{Name: "alice", Roles: []versioning.Role{versioning.RoleOperator}}
	approver := versioning.Actor{Name: "bob", Roles: []versioning.Role{versioning.RoleApprover}}
	for _, o := range openers {
		b.Run(o.name, func(b *testing.B) {
			ctx := context.Background()
			h := o.open(b)
			var worker atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				service := fmt.Sprintf("bench-%d", worker.Add(1))
				var active int64
				rate := 1.0
				for pb.Next() {
					rate++
					rs := &rules.Ruleset{Service: service, Routes: []rules.Route{{Name: "api",
						Match: rules.Match{PathPrefix: "/api"}, RateLimit: &rules.RateLimit{Rate: rate}}}}
					v, err := h.Store.Propose(ctx, versioning.Proposal{BaseVersion: active, Ruleset: rs,
						Author: author, Reason: "bench", Evidence: []byte(`{"load":0.5}`)})
					if err != nil {
						b.Error(err)
						return
					}
					if _, err := h.Store.Approve(ctx, service, v.Number, approver, ""); err != nil {
						b.Error(err)
						return
					}
					active = v.Number
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "changes/s")
			_, err := h.Store.VerifyAudit(ctx)
			require.NoError(b, err)
		})
	}
}

// BenchmarkRevise measures the engine revising its open proposal in place,
// alternating an evidence-only revision with one that changes the ruleset
// (which starts a new approval round); an approval is given before each so
// the round has something to invalidate. Each goroutine works on its own
// service; the audit chain head is shared by all. One op is one revision
// plus one approval.
func BenchmarkRevise(b *testing.B) {
	engine := versioning.Actor{Name: "engine", Roles: []versioning.Role{versioning.RoleOperator}}
	approver := versioning.Actor{Name: "bob", Roles: []versioning.Role{versioning.RoleApprover}}
	admin := versioning.Actor{Name: "root", Roles: []versioning.Role{versioning.RoleAdmin}}
	ruleset := func(service string, rate float64) *rules.Ruleset {
		return &rules.Ruleset{Service: service, Routes: []rules.Route{{Name: "api",
			Match: rules.Match{PathPrefix: "/api"}, RateLimit: &rules.RateLimit{Rate: rate}}}}
	}
	for _, o := range openers {
		b.Run(o.name, func(b *testing.B) {
			ctx := context.Background()
			h := o.open(b)
			var worker atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				service := fmt.Sprintf("bench-%d", worker.Add(1))
				// Two approvals required, so one approval never completes it.
				if _, err := h.Store.SetPolicy(ctx, versioning.Policy{Service: service, ApprovalsRequired: 2}, admin); err != nil {
					b.Error(err)
					return
				}
				p := versioning.Proposal{Ruleset: ruleset(service, 1), Author: engine, Source: versioning.SourceEngine,
					Reason: "bench", Evidence: []byte(`{"load":0.5}`)}
				v, err := h.Store.Propose(ctx, p)
				if err != nil {
					b.Error(err)
					return
				}
				for i := 0; pb.Next(); i++ {
					if i%2 == 1 {
						p.Ruleset = ruleset(service, float64(i+1))
					} else if _, err := h.Store.Approve(ctx, service, v.Number, approver, ""); err != nil {
						b.Error(err)
						return
					}
					p.Evidence = fmt.Appendf(nil, `{"load":%d}`, i)
					if _, err := h.Store.Revise(ctx, service, v.Number, p); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			_, err := h.Store.VerifyAudit(ctx)
			require.NoError(b, err)
		})
	}
}
