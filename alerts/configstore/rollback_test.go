package configstore_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/configstore"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/clock"
)

// A rollback stores the earlier version's document, with its own secrets
// (not those of the version it replaces, which a masked copy saved on the
// newest base would keep), as a new version; a stale base is a conflict
// naming the versions; history keeps every version.
func TestRollbackStoresTheEarlierDocumentAsANewVersion(t *testing.T) {
	bothBackends(t, func(t *testing.T, open func(*testing.T, clock.Clock) *configstore.Store) {
		ctx := context.Background()
		s := open(t, clock.NewFake(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)))
		v1, err := s.Save(ctx, configstore.SaveRequest{Document: docV1, Author: "ada", Comment: "one"})
		require.NoError(t, err)
		v2doc := strings.Replace(docV1, "R0UTINGKEY-secret", "NEWKEY", 1)
		_, err = s.Save(ctx, configstore.SaveRequest{Document: v2doc, Base: 1, Author: "ada", Comment: "new key"})
		require.NoError(t, err)

		v3, err := s.Rollback(ctx, configstore.RollbackRequest{To: 1, Base: 2, Author: "bob", Comment: " back to one "})
		require.NoError(t, err)
		require.Equal(t, int64(3), v3.Number)
		require.Equal(t, v1.Document, v3.Document)
		require.Equal(t, "bob", v3.Author)
		require.Equal(t, "back to one", v3.Comment)
		latest, err := s.Latest(ctx)
		require.NoError(t, err)
		require.Equal(t, v3, latest)

		_, err = s.Rollback(ctx, configstore.RollbackRequest{To: 1, Base: 2, Author: "cy", Comment: "back"})
		require.ErrorIs(t, err, configstore.ErrConflict)
		require.ErrorContains(t, err, "version 3 was saved by bob")
		require.ErrorContains(t, err, "since the version 2 this edit started from")

		for _, tt := range []struct {
			r    configstore.RollbackRequest
			want string
		}{
			{configstore.RollbackRequest{To: 9, Base: 3, Author: "bob", Comment: "c"}, "to: version 9 is not an earlier version than the base 3"},
			{configstore.RollbackRequest{To: 3, Base: 3, Author: "bob", Comment: "c"}, "to: version 3"},
			{configstore.RollbackRequest{To: 0, Base: 3, Author: "bob", Comment: "c"}, "to: version 0"},
			{configstore.RollbackRequest{To: 1, Base: 3, Author: "bob"}, "comment"},
			{configstore.RollbackRequest{To: 1, Base: 3, Comment: "c"}, "author"},
		} {
			_, err := s.Rollback(ctx, tt.r)
			require.ErrorIs(t, err, alerts.ErrInvalid, tt.want)
			require.ErrorContains(t, err, tt.want)
		}
		list, err := s.List(ctx, 0)
		require.NoError(t, err)
		require.Equal(t, []int64{3, 2, 1}, numbers(list))
	})
}

// The rollback's audit entry says which version it restores.
func TestRollbackAuditEntryNamesTheVersionRestored(t *testing.T) {
	ctx := context.Background()
	s := sharedSQLite(t, clock.NewFake(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)))
	_, err := s.cs.Save(ctx, configstore.SaveRequest{Document: docV1, Author: "ada", Comment: "one"})
	require.NoError(t, err)
	_, err = s.cs.Save(ctx, configstore.SaveRequest{Document: docV1, Base: 1, Author: "ada", Comment: "two"})
	require.NoError(t, err)
	admin := []versioning.Role{versioning.RoleAdmin}
	_, err = s.cs.Rollback(ctx, configstore.RollbackRequest{To: 1, Base: 2, Author: "bob", Roles: admin, Comment: "back"})
	require.NoError(t, err)
	entries, err := s.rules.Audit(ctx, versioning.AuditFilter{Action: configstore.AuditAction})
	require.NoError(t, err)
	require.Len(t, entries, 3)
	e := entries[2]
	require.Equal(t, int64(3), e.Version)
	require.Equal(t, admin, e.Roles)
	var detail map[string]any
	require.NoError(t, json.Unmarshal(e.Detail, &detail))
	require.Equal(t, map[string]any{"version": 3.0, "comment": "back", "rollback_of": 1.0}, detail)
}

// ListPage pages newest first from a Before cursor (the last number of
// the page before); List(limit) is ListPage with only a limit.
func TestListPageContinuesBeforeTheCursor(t *testing.T) {
	bothBackends(t, func(t *testing.T, open func(*testing.T, clock.Clock) *configstore.Store) {
		ctx := context.Background()
		s := open(t, clock.NewFake(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)))
		for base := range int64(5) {
			_, err := s.Save(ctx, configstore.SaveRequest{Document: docV1, Base: base, Author: "ada", Comment: "c"})
			require.NoError(t, err)
		}
		for _, tt := range []struct {
			o    configstore.ListOptions
			want []int64
		}{
			{configstore.ListOptions{Limit: 2}, []int64{5, 4}},
			{configstore.ListOptions{Limit: 2, Before: 4}, []int64{3, 2}},
			{configstore.ListOptions{Limit: 2, Before: 2}, []int64{1}},
			{configstore.ListOptions{Limit: 2, Before: 1}, nil},
			{configstore.ListOptions{Before: 99}, []int64{5, 4, 3, 2, 1}},
		} {
			page, err := s.ListPage(ctx, tt.o)
			require.NoError(t, err)
			require.Equal(t, tt.want, numbers(page), "%+v", tt.o)
		}
		list, err := s.List(ctx, 3)
		require.NoError(t, err)
		require.Equal(t, []int64{5, 4, 3}, numbers(list))
		_, err = s.ListPage(ctx, configstore.ListOptions{Before: -1})
		require.ErrorIs(t, err, alerts.ErrInvalid)
		require.ErrorContains(t, err, "before: must not be negative")
	})
}

func numbers(vs []configstore.Version) []int64 {
	var out []int64
	for _, v := range vs {
		out = append(out, v.Number)
	}
	return out
}
