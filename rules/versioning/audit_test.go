package versioning_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
)

func chain(n int) []versioning.AuditEntry {
	prev := versioning.GenesisHash
	at := time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC)
	out := make([]versioning.AuditEntry, n)
	for i := range out {
		e := versioning.AuditEntry{Seq: int64(i + 1), At: at.Add(time.Duration(i) * time.Second), Actor: "alice",
			Roles: []versioning.Role{versioning.RoleOperator}, Action: versioning.ActionPropose, Service: "s",
			Version: int64(i + 1), Detail: json.RawMessage(`{"n":1}`), PrevHash: prev}
		e.Hash = e.ComputeHash()
		prev = e.Hash
		out[i] = e
	}
	return out
}

func TestHashInputIsCanonical(t *testing.T) {
	e := chain(1)[0]
	require.Equal(t, `{"seq":1,"at":"2026-03-04T05:06:07.123456Z","actor":"alice","roles":["operator"],"action":"propose",`+
		`"service":"s","version":1,"detail":{"n":1},"prev_hash":"`+versioning.GenesisHash+`"}`, string(e.HashInput()))
	// The same instant in another zone hashes the same.
	e2 := e
	e2.At = e.At.In(time.FixedZone("x", 3600))
	require.Equal(t, e.ComputeHash(), e2.ComputeHash())
	// Nil roles and detail hash like empty ones.
	e3, e4 := e, e
	e3.Roles, e3.Detail = nil, nil
	e4.Roles, e4.Detail = []versioning.Role{}, json.RawMessage(`{}`)
	require.Equal(t, e3.ComputeHash(), e4.ComputeHash())
	// Corrupt detail still hashes (to something that will not verify).
	e5 := e
	e5.Detail = json.RawMessage(`{"n":`)
	require.NotEqual(t, e.ComputeHash(), e5.ComputeHash())
}

func TestVerifyChain(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(c []versioning.AuditEntry) []versioning.AuditEntry
		seq     int64
		problem string
	}{
		{"intact", func(c []versioning.AuditEntry) []versioning.AuditEntry { return c }, 0, ""},
		{"edited actor", func(c []versioning.AuditEntry) []versioning.AuditEntry { c[2].Actor = "mallory"; return c }, 3, "does not match its hash"},
		{"edited and rehashed", func(c []versioning.AuditEntry) []versioning.AuditEntry {
			c[1].Detail = json.RawMessage(`{"n":2}`)
			c[1].Hash = c[1].ComputeHash()
			return c
		}, 3, "prev_hash"},
		{"removed entry", func(c []versioning.AuditEntry) []versioning.AuditEntry { return append(c[:1], c[2:]...) }, 3, "sequence jumps from 1 to 3"},
		{"reordered", func(c []versioning.AuditEntry) []versioning.AuditEntry { c[0], c[1] = c[1], c[0]; return c }, 2, "sequence jumps from 0 to 2"},
		{"edited time", func(c []versioning.AuditEntry) []versioning.AuditEntry {
			c[3].At = c[3].At.Add(time.Microsecond)
			return c
		}, 4, "does not match its hash"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.edit(chain(5))
			seq, head, err := versioning.VerifyChain(0, versioning.GenesisHash, c)
			if tt.seq == 0 {
				require.NoError(t, err)
				require.Equal(t, int64(5), seq)
				require.Equal(t, c[4].Hash, head)
				return
			}
			require.ErrorIs(t, err, versioning.ErrTampered)
			var ce *versioning.ChainError
			require.True(t, errors.As(err, &ce))
			require.Equal(t, tt.seq, ce.Seq)
			require.Contains(t, ce.Problem, tt.problem)
			require.Contains(t, err.Error(), "versioning: audit chain broken at entry")
		})
	}
}

func TestVerifyChainInPages(t *testing.T) {
	c := chain(7)
	seq, head, err := versioning.VerifyChain(0, versioning.GenesisHash, c[:3])
	require.NoError(t, err)
	seq, head, err = versioning.VerifyChain(seq, head, c[3:])
	require.NoError(t, err)
	require.Equal(t, int64(7), seq)
	require.Equal(t, c[6].Hash, head)
}

func TestLifecycleActions(t *testing.T) {
	for _, a := range []versioning.Action{versioning.ActionPropose, versioning.ActionApprove, versioning.ActionEmergency, versioning.ActionPublish, versioning.ActionRevise, versioning.ActionRenumber} {
		require.True(t, a.Lifecycle(), a)
	}
	for _, a := range []versioning.Action{versioning.ActionLoginFailure, versioning.ActionTokenCreate, "custom"} {
		require.False(t, a.Lifecycle(), a)
	}
	require.Equal(t, []versioning.Role{"a", "b"}, versioning.SplitRoles(versioning.JoinRoles([]versioning.Role{"a", "b"})))
	require.Empty(t, versioning.SplitRoles(""))
}

// TestAuditFilterValidate: a filter value no entry can hold (from a query
// string: ?actor=%00) is bad input naming its field.
func TestAuditFilterValidate(t *testing.T) {
	tests := []struct {
		name   string
		f      versioning.AuditFilter
		fields []string
	}{
		{"empty", versioning.AuditFilter{}, nil},
		{"valid", versioning.AuditFilter{Service: "checkout", Actor: "system:outbox-relay", Action: versioning.ActionLoginFailure}, nil},
		{"other component's action", versioning.AuditFilter{Action: "alert_config.save"}, nil},
		{"bad text", versioning.AuditFilter{Service: "\xff", Actor: "a\x00b", Action: "Login"}, []string{"service", "actor", "action"}},
		{"too long actor", versioning.AuditFilter{Actor: strings.Repeat("a", versioning.MaxActorBytes+1)}, []string{"actor"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.fields, fieldNames(t, tt.f.Validate()))
		})
	}
}
