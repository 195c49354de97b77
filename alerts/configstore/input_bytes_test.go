package configstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/configstore"
	"governor.dev/governor/sdk/clock"
)

// bothBackends runs test against SQLite and, unless -short, PostgreSQL.
func bothBackends(t *testing.T, test func(*testing.T, func(*testing.T, clock.Clock) *configstore.Store)) {
	t.Run("sqlite", func(t *testing.T) { test(t, openSQLite) })
	t.Run("postgres", func(t *testing.T) {
		if testing.Short() {
			t.Skip("PostgreSQL integration test")
		}
		test(t, openPostgres)
	})
}

// PostgreSQL's text holds neither NUL bytes nor invalid UTF-8: both
// backends refuse them as invalid input naming the field, rather than
// SQLite saving what PostgreSQL fails to store (a store error).
func TestSaveRefusesBytesPostgresCannotHoldOnEveryBackend(t *testing.T) {
	bothBackends(t, func(t *testing.T, open func(*testing.T, clock.Clock) *configstore.Store) {
		ctx := context.Background()
		s := open(t, clock.NewFake(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)))
		tests := []struct{ name, doc, author, comment, want string }{
			{"NUL in comment", docV1, "ada", "a\x00b", "comment"},
			{"invalid UTF-8 in comment", docV1, "ada", "a\xffb", "comment"},
			{"NUL in author", docV1, "a\x00da", "c", "author"},
			{"invalid UTF-8 in document", strings.Replace(docV1, "#ops", "#o\xffps", 1), "ada", "c", "document: byte "},
		}
		for _, tt := range tests {
			_, err := s.Save(ctx, configstore.SaveRequest{Document: tt.doc, Author: tt.author, Comment: tt.comment})
			require.ErrorIs(t, err, alerts.ErrInvalid, tt.name)
			require.ErrorContains(t, err, tt.want, tt.name)
		}
		_, err := s.Latest(ctx)
		require.ErrorIs(t, err, alerts.ErrNotFound, "nothing was saved")
	})
}

// MaxDocumentBytes bounds the document stored, not only the one sent: a
// masked document under the bound whose masks restore long secrets is
// refused, and says why.
func TestSaveBoundsTheDocumentWithItsRestoredSecrets(t *testing.T) {
	bothBackends(t, func(t *testing.T, open func(*testing.T, clock.Clock) *configstore.Store) {
		ctx := context.Background()
		s := open(t, clock.NewFake(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)))
		long := "https://hooks.slack.com/services/T0/B0/" + strings.Repeat("x", 600<<10)
		doc := strings.Replace(docV1, `https://hooks.slack.com/services/T0/B0/tok\u00e9n`, long, 1)
		_, err := s.Save(ctx, configstore.SaveRequest{Document: doc, Author: "ada", Comment: "long url"})
		require.NoError(t, err)
		masked, err := configstore.Mask(doc)
		require.NoError(t, err)
		padded := masked + strings.Repeat(" ", configstore.MaxDocumentBytes-len(masked))
		_, err = s.Save(ctx, configstore.SaveRequest{Document: padded, Base: 1, Author: "ada", Comment: "padded"})
		require.ErrorIs(t, err, alerts.ErrInvalid)
		require.ErrorContains(t, err, "larger than the 1048576 allowed (with the saved secrets its masks keep)")
		_, err = s.Save(ctx, configstore.SaveRequest{Document: padded + " ", Base: 1, Author: "ada", Comment: "padded"})
		require.ErrorContains(t, err, "document: 1048577 bytes, larger than the 1048576 allowed")
		latest, err := s.Latest(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(1), latest.Number)
	})
}
