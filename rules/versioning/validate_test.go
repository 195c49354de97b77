package versioning_test

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/rules"
)

func fieldNames(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var ie *versioning.InputError
	require.ErrorAs(t, err, &ie)
	require.ErrorIs(t, err, versioning.ErrInvalid)
	out := make([]string, len(ie.Errors))
	for i, fe := range ie.Errors {
		out[i] = fe.Field
	}
	return out
}

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		name   string
		in     versioning.Policy
		want   versioning.Policy
		fields []string
	}{
		{"defaults", versioning.Policy{Service: "s"}, versioning.DefaultPolicy("s"), nil},
		{"custom", versioning.Policy{Service: "s", ApprovalsRequired: 3, ApproverRoles: []versioning.Role{versioning.RoleAdmin}, ManualOnly: true},
			versioning.Policy{Service: "s", ApprovalsRequired: 3, ApproverRoles: []versioning.Role{versioning.RoleAdmin}, ManualOnly: true}, nil},
		{"bad", versioning.Policy{Service: "", ApprovalsRequired: -1, ApproverRoles: []versioning.Role{versioning.RoleViewer, "x", versioning.RoleAdmin, versioning.RoleAdmin}},
			versioning.Policy{}, []string{"service", "approvals_required", "approver_roles[0]", "approver_roles[1]", "approver_roles[3]"}},
		{"band", versioning.Policy{Service: "s", Band: &versioning.AutoApplyBand{MaxChangePerHour: 0.25, Floor: 50, Ceiling: 500}},
			versioning.Policy{Service: "s", ApprovalsRequired: 1, ApproverRoles: versioning.DefaultPolicy("s").ApproverRoles,
				Band: &versioning.AutoApplyBand{MaxChangePerHour: 0.25, Floor: 50, Ceiling: 500}}, nil},
		{"band without bounds", versioning.Policy{Service: "s", Band: &versioning.AutoApplyBand{}},
			versioning.Policy{Service: "s", ApprovalsRequired: 1, ApproverRoles: versioning.DefaultPolicy("s").ApproverRoles,
				Band: &versioning.AutoApplyBand{}}, nil},
		{"band out of range", versioning.Policy{Service: "s", Band: &versioning.AutoApplyBand{MaxChangePerHour: 11, Floor: -1, Ceiling: math.Inf(1)}},
			versioning.Policy{}, []string{"band.max_change_per_hour", "band.floor", "band.ceiling"}},
		{"band NaN", versioning.Policy{Service: "s", Band: &versioning.AutoApplyBand{MaxChangePerHour: math.NaN(), Floor: math.NaN()}},
			versioning.Policy{}, []string{"band.max_change_per_hour", "band.floor"}},
		{"negative revision", versioning.Policy{Service: "s", Revision: -1}, versioning.Policy{}, []string{"revision"}},
		{"band floor above ceiling", versioning.Policy{Service: "s", Band: &versioning.AutoApplyBand{MaxChangePerHour: 0.1, Floor: 200, Ceiling: 100}},
			versioning.Policy{}, []string{"band.floor"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.in.Validate()
			require.Equal(t, tt.fields, fieldNames(t, err))
			if tt.fields == nil {
				require.Equal(t, tt.want, got)
			}
		})
	}
}

func TestProposalValidate(t *testing.T) {
	ok := versioning.Proposal{Ruleset: &rules.Ruleset{Service: "s"}, Author: versioning.Actor{Name: "alice@example.com"}, Reason: "why"}
	tests := []struct {
		name   string
		edit   func(p *versioning.Proposal)
		fields []string
	}{
		{"valid", func(p *versioning.Proposal) {}, nil},
		{"evidence ok", func(p *versioning.Proposal) { p.Evidence = []byte(` {"a": [1, 2]} `) }, nil},
		{"everything wrong", func(p *versioning.Proposal) {
			p.Ruleset = &rules.Ruleset{Service: "bad name"}
			p.Service = "other"
			p.BaseVersion = -2
			p.Author = versioning.Actor{Name: "a b", Roles: []versioning.Role{"root"}}
			p.Reason = ""
			p.Evidence = []byte("nope")
			p.Source = "cron"
			p.AutoApply = true
		}, []string{"ruleset.service", "service", "base_version", "author.name", "author.roles[0]", "reason", "evidence", "source", "auto_apply"}},
		{"invalid UTF-8 reason", func(p *versioning.Proposal) { p.Reason = "\xff" }, []string{"reason"}},
		{"NUL in reason", func(p *versioning.Proposal) { p.Reason = "a\x00b" }, []string{"reason"}},
		{"evidence not UTF-8", func(p *versioning.Proposal) { p.Evidence = []byte("{\"a\":\"\xff\"}") }, []string{"evidence"}},
		{"auto-apply rebased", func(p *versioning.Proposal) {
			p.Source, p.AutoApply, p.Rebase = versioning.SourceEngine, true, true
		}, []string{"rebase"}},
		{"long actor", func(p *versioning.Proposal) { p.Author.Name = strings.Repeat("a", versioning.MaxActorBytes+1) }, []string{"author.name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := ok
			tt.edit(&p)
			require.Equal(t, tt.fields, fieldNames(t, p.Validate()))
		})
	}
}

func TestInputErrorMessage(t *testing.T) {
	_, err := versioning.Policy{Service: "s", ApprovalsRequired: 20}.Validate()
	require.EqualError(t, err, "versioning: invalid input: approvals_required: must be between 1 and 10, got 20")
}

func TestPolicyBandErrorMessage(t *testing.T) {
	_, err := versioning.Policy{Service: "s", Band: &versioning.AutoApplyBand{MaxChangePerHour: 0.1, Floor: 200, Ceiling: 100}}.Validate()
	require.EqualError(t, err, "versioning: invalid input: band.floor: 200 req/s is above band.ceiling 100 req/s")
}

func TestActorHas(t *testing.T) {
	a := versioning.Actor{Name: "x", Roles: []versioning.Role{versioning.RoleOperator}}
	require.True(t, a.Has(versioning.RoleAdmin, versioning.RoleOperator))
	require.False(t, a.Has(versioning.RoleAdmin))
	require.False(t, a.Has())
	require.True(t, versioning.StateSuperseded.WentLive())
	require.False(t, versioning.StateRejected.WentLive())
}

func TestSamePersonIgnoresCaseOnly(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"alice", "alice", true},
		{"alice", "Alice", true},
		{"ALICE", "alice", true},
		{"alice", "alice2", false},
		{"alice", " alice", false},
		{"alice", "", false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, versioning.SamePerson(tt.a, tt.b), "%q %q", tt.a, tt.b)
	}
}
