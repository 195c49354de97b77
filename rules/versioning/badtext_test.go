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
				// Reads too: a filter from a query string (GET /audit?actor=%00).
				{"actor", func() error {
					_, err := s.Audit(ctx, versioning.AuditFilter{Actor: "a\x00b"})
					return err
				}},
				{"service", func() error {
					_, err := s.Audit(ctx, versioning.AuditFilter{Service: "\xff"})
					return err
				}},
				{"action", func() error {
					_, err := s.Audit(ctx, versioning.AuditFilter{Action: "login\x00"})
					return err
				}},
				{"service", func() error {
					_, err := s.Get(ctx, "x\x00", v.Number)
					return err
				}},
				{"service", func() error {
					_, err := s.Active(ctx, "\xff")
					return err
				}},
				{"states[0]", func() error {
					_, err := s.List(ctx, versioning.ListFilter{Service: "x", States: []versioning.State{"proposed\x00"}})
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
