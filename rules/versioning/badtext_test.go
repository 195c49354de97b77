package versioning_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/internal/conformance"
	"governor.dev/governor/sdk/rules"
)

var (
	textAlice = versioning.Actor{Name: "alice", Roles: []versioning.Role{versioning.RoleOperator}}
	textBob   = versioning.Actor{Name: "bob", Roles: []versioning.Role{versioning.RoleApprover}}
)

func textStores(t *testing.T) map[string]func(t *testing.T) versioning.Store {
	return map[string]func(t *testing.T) versioning.Store{
		"sqlite":   func(t *testing.T) versioning.Store { return sqliteHarness(t, conformance.Options{}).Store },
		"postgres": func(t *testing.T) versioning.Store { return postgresHarness(t, conformance.Options{}).Store },
	}
}

// TestTextTheDatabaseCannotStoreIsBadInput: text input the database cannot store is bad
// input and must be refused as an *InputError naming the field, not as
// ErrUnavailable (which callers report as a server failure).
func TestTextTheDatabaseCannotStoreIsBadInput(t *testing.T) {
	ctx := context.Background()
	for name, open := range textStores(t) {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			v, err := s.Propose(ctx, versioning.Proposal{Ruleset: &rules.Ruleset{Service: "x"}, Author: textAlice, Reason: "ok"})
			require.NoError(t, err)
			cases := []struct {
				field string
				do    func() error
			}{
				{"evidence", func() error {
					_, err := s.Propose(ctx, versioning.Proposal{Ruleset: &rules.Ruleset{Service: "x"}, BaseVersion: 0,
						Author: textAlice, Reason: "r", Evidence: []byte("{\"note\":\"\xff\xfe\"}")})
					return err
				}},
				{"reason", func() error {
					_, err := s.Propose(ctx, versioning.Proposal{Ruleset: &rules.Ruleset{Service: "x"}, Author: textAlice, Reason: "a\x00b"})
					return err
				}},
				{"comment", func() error {
					_, err := s.Reject(ctx, "x", v.Number, textBob, "no\x00pe")
					return err
				}},
			}
			for _, c := range cases {
				t.Run(c.field, func(t *testing.T) {
					err := c.do()
					require.Error(t, err, "accepted bad %s", c.field)
					var ie *versioning.InputError
					require.ErrorAs(t, err, &ie, "%s: got %v", c.field, err)
					require.Equal(t, c.field, ie.Errors[0].Field)
				})
			}
		})
	}
}
