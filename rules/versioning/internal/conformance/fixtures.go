package conformance

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/rules"
)

var (
	alice  = versioning.Actor{Name: "alice", Roles: []versioning.Role{versioning.RoleOperator}}
	bob    = versioning.Actor{Name: "bob", Roles: []versioning.Role{versioning.RoleApprover}}
	carol  = versioning.Actor{Name: "carol", Roles: []versioning.Role{versioning.RoleApprover}}
	root   = versioning.Actor{Name: "root", Roles: []versioning.Role{versioning.RoleAdmin}}
	viewer = versioning.Actor{Name: "vera", Roles: []versioning.Role{versioning.RoleViewer}}
	engine = versioning.Actor{Name: "engine", Roles: []versioning.Role{versioning.RoleOperator}}
)

// ruleset returns a valid ruleset whose rate limit is rate.
func ruleset(service string, rate float64) *rules.Ruleset {
	return &rules.Ruleset{
		Service: service,
		Routes: []rules.Route{{
			Name: "api", Match: rules.Match{PathPrefix: "/api", Methods: []string{"GET", "POST"}},
			RateLimit:   &rules.RateLimit{Rate: rate, Burst: 10},
			Concurrency: &rules.Concurrency{Algorithm: rules.AlgorithmGradient, Min: 4, Max: 200},
		}},
		Downstreams: []rules.Downstream{{Name: "db", Retry: &rules.Retry{MaxAttempts: 3, Budget: 0.1}}},
	}
}

func propose(t *testing.T, s versioning.Store, service string, base int64, rate float64) versioning.Version {
	t.Helper()
	v, err := s.Propose(context.Background(), versioning.Proposal{
		BaseVersion: base, Ruleset: ruleset(service, rate), Author: alice,
		Reason: fmt.Sprintf("set rate to %v", rate), Evidence: []byte(`{"p99_ms": 120}`),
	})
	require.NoError(t, err)
	return v
}

// live proposes and approves a version on top of the active one.
func live(t *testing.T, s versioning.Store, service string, rate float64) versioning.Version {
	t.Helper()
	base := int64(0)
	if a, err := s.Active(context.Background(), service); err == nil {
		base = a.Number
	}
	v := propose(t, s, service, base, rate)
	v, err := s.Approve(context.Background(), service, v.Number, bob, "looks right")
	require.NoError(t, err)
	require.Equal(t, versioning.StateApproved, v.State)
	return v
}

func auditCount(t *testing.T, h Harness) int64 {
	t.Helper()
	return h.Count(context.Background(), `SELECT count(*) FROM rule_audit`)
}

func outboxCount(t *testing.T, h Harness, service string, version int64) int64 {
	t.Helper()
	return h.Count(context.Background(), `SELECT count(*) FROM rule_outbox WHERE service = $1 AND version = $2`, service, version)
}

// fieldsOf returns the field names of an *InputError.
func fieldsOf(t *testing.T, err error) []string {
	t.Helper()
	require.ErrorIs(t, err, versioning.ErrInvalid)
	var ie *versioning.InputError
	require.ErrorAs(t, err, &ie)
	out := make([]string, len(ie.Errors))
	for i, fe := range ie.Errors {
		out[i] = fe.Field
	}
	return out
}
