package configstore_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/config"
	"governor.dev/governor/alerts/configstore"
	"governor.dev/governor/internal/sqlitedb"
	"governor.dev/governor/internal/testenv"
	"governor.dev/governor/migrations"
	"governor.dev/governor/sdk/clock"
)

const docV1 = `{
  "routes": [
    {"receiver": "pager", "severities": ["P0"], "continue": true},
    {"receiver": "team", "matchers": "{service=\"checkout\"}"},
    {"receiver": "pager"}
  ],
  "timing": {"group_wait": "30s"},
  "receivers": [
    {"name": "pager", "pagerduty": {"routing_key": "R0UTINGKEY-secret"}},
    {"name": "team", "slack": {"url": "https://hooks.slack.com/services/T0/B0/tok\u00e9n", "channel": "#ops"}}
  ]
}`

func openSQLite(t *testing.T, clk clock.Clock) *configstore.Store {
	t.Helper()
	db, err := sqlitedb.Open(filepath.Join(t.TempDir(), "g.db"), sqlitedb.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	s, err := configstore.New(context.Background(), db, migrations.SQLite, configstore.Options{Clock: clk})
	require.NoError(t, err)
	return s
}

func openPostgres(t *testing.T, clk clock.Clock) *configstore.Store {
	t.Helper()
	db, err := sql.Open("pgx", testenv.Postgres(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	s, err := configstore.New(context.Background(), db, migrations.Postgres, configstore.Options{Clock: clk})
	require.NoError(t, err)
	return s
}

func TestStoreSQLite(t *testing.T) { testStore(t, openSQLite) }

func TestStorePostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("PostgreSQL integration test")
	}
	testStore(t, openPostgres)
}

func testStore(t *testing.T, open func(*testing.T, clock.Clock) *configstore.Store) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))
	s := open(t, clk)

	_, err := s.Latest(ctx)
	require.ErrorIs(t, err, alerts.ErrNotFound)

	v1, err := s.Save(ctx, configstore.SaveRequest{Document: docV1, Author: "ada", Comment: "first routing"})
	require.NoError(t, err)
	require.Equal(t, int64(1), v1.Number)
	require.Equal(t, docV1, v1.Document, "the text is kept as typed")

	// Invalid documents are refused whole, the field named; nothing stored.
	for _, tt := range []struct{ doc, want string }{
		{`{"receivers": []}`, "receivers: at least one is required"},
		{`{"routes": [{"receiver": "nobody"}], "receivers": [{"name": "a", "webhook": {"url": "http://x"}}]}`, `routes[0]: receiver "nobody" is not defined`},
		{`{"receivers": [{"name": "a", "webhook": {"url": "ftp://x"}}]}`, "receivers[0] (a): "},
		{`{"routes": [{"receiver": "a", "severities": ["P0"]}], "receivers": [{"name": "a", "webhook": {"url": "http://x"}}]}`,
			"routes: no route catches every alert"},
		{"{\n \"receivers\": [\n  {\"name\": 1}]}", "line 3"},
		{`{"receivers": [{"name": "a", "webhook": {"url": "http://x"}}], "extra": 1}`, `unknown field "extra"`},
	} {
		_, err := s.Save(ctx, configstore.SaveRequest{Document: tt.doc, Base: 1, Author: "ada", Comment: "c"})
		require.ErrorIs(t, err, alerts.ErrInvalid, tt.doc)
		require.Contains(t, err.Error(), tt.want)
	}
	_, err = s.Save(ctx, configstore.SaveRequest{Document: docV1, Base: 1, Author: "ada"})
	require.ErrorContains(t, err, "comment")
	_, err = s.Save(ctx, configstore.SaveRequest{Document: docV1, Base: 1, Comment: "c"})
	require.ErrorContains(t, err, "author")

	// Edit the masked document: the masks keep the saved secrets.
	masked, err := configstore.Mask(v1.Document)
	require.NoError(t, err)
	require.NotContains(t, masked, "R0UTINGKEY")
	require.NotContains(t, masked, "tok")
	require.Contains(t, masked, `"<masked:hooks.slack.com>"`)
	edited := strings.Replace(masked, `"group_wait": "30s"`, `"group_wait": "1m"`, 1)
	clk.Advance(time.Minute)
	v2, err := s.Save(ctx, configstore.SaveRequest{Document: edited, Base: 1, Author: "ada", Comment: "slower"})
	require.NoError(t, err)
	require.Equal(t, int64(2), v2.Number)
	require.Contains(t, v2.Document, `"R0UTINGKEY-secret"`)
	require.Contains(t, v2.Document, `tok\u00e9n`, "the secret's bytes are restored exactly")
	require.Contains(t, v2.Document, `"group_wait": "1m"`)
	c, err := v2.Config()
	require.NoError(t, err)
	require.Equal(t, "R0UTINGKEY-secret", c.Receivers[0].PagerDuty.RoutingKey)

	// A stale edit is refused with who saved since.
	_, err = s.Save(ctx, configstore.SaveRequest{Document: docV1, Base: 1, Author: "bob", Comment: "late"})
	require.ErrorIs(t, err, configstore.ErrConflict)
	require.Contains(t, err.Error(), "version 2 was saved by ada")

	// A mask for a receiver that has no saved secret is refused.
	renamed := strings.Replace(masked, `"name": "pager"`, `"name": "pager2"`, 1)
	renamed = strings.Replace(renamed, `"receiver": "pager"`, `"receiver": "pager2"`, 1)
	_, err = s.Save(ctx, configstore.SaveRequest{Document: renamed, Base: 2, Author: "ada", Comment: "rename"})
	require.ErrorIs(t, err, alerts.ErrInvalid)
	require.Contains(t, err.Error(), `receivers[0].pagerduty.routing_key: the value is masked, but no saved receiver "pager2"`)

	latest, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, v2, latest)
	list, err := s.List(ctx, 0)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, int64(2), list[0].Number)
	require.Equal(t, "slower", list[0].Comment)
	require.Equal(t, clk.Now(), list[0].CreatedAt)
	got, err := s.Get(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, v1, got)
	_, err = s.Get(ctx, 9)
	require.ErrorIs(t, err, alerts.ErrNotFound)

	// Concurrent saves on the same base: exactly one wins.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = s.Save(ctx, configstore.SaveRequest{Document: docV1, Base: 2, Author: "ada", Comment: "race"})
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
			continue
		}
		require.True(t, errors.Is(err, configstore.ErrConflict), "%v", err)
	}
	require.Equal(t, 1, won)
}

func TestSummarizeMasksSecrets(t *testing.T) {
	v := configstore.Version{Document: docV1}
	c, err := v.Config()
	require.NoError(t, err)
	s := configstore.Summarize(c)
	require.Equal(t, []configstore.ReceiverRow{
		{Name: "pager", Kind: "pagerduty", Target: "routing key <masked>"},
		{Name: "team", Kind: "slack", Target: "<masked:hooks.slack.com> #ops"},
	}, s.Receivers)
	require.Equal(t, []configstore.RouteRow{
		{Receiver: "pager", Severities: "P0", Continue: true},
		{Receiver: "team", Matchers: `{service="checkout"}`},
		{Receiver: "pager"},
	}, s.Routes)
}

func TestMaskUnmaskRoundTrip(t *testing.T) {
	doc := `{"receivers": [
	  {"webhook": {"url": "https://hook.example/t?token=abc"}, "name": "w"},
	  {"name": "m", "email": {"smarthost": "mail:25", "from": "a@b.c", "to": ["d@e.f"], "username": "u", "password": "pw\"x"}},
	  {"name": "am", "alertmanager": {"url": "http://am:9093"}}
	], "routes": [{"receiver": "w"}, {"receiver": "m"}, {"receiver": "am"}]}`
	masked, err := configstore.Mask(doc)
	require.NoError(t, err)
	require.NotContains(t, masked, "token=abc")
	require.NotContains(t, masked, `pw\"x`)
	back, err := configstore.Unmask(masked, doc)
	require.NoError(t, err)
	require.Equal(t, doc, back)
	// Not JSON: left for config.Parse to locate.
	back, err = configstore.Unmask("{nope", doc)
	require.NoError(t, err)
	require.Equal(t, "{nope", back)
	_, err = configstore.Mask("{nope")
	require.ErrorIs(t, err, alerts.ErrInvalid)
}

// config.Parse reads keys as encoding/json does, ignoring case: a document
// written with "URL" or "Routing_Key" configures the receiver's secret, so
// Mask hides it too (the settings page would show the token otherwise), and
// Unmask puts it back.
func TestMaskIgnoresKeyCaseAsParseDoes(t *testing.T) {
	doc := `{"Receivers": [{"Name": "w", "Webhook": {"URL": "https://hook.example/t?token=abc"}},
	  {"name": "p", "pagerduty": {"Routing_Key": "R0UTINGKEY-secret"}}],
	  "routes": [{"receiver": "w"}, {"receiver": "p"}]}`
	c, err := config.Parse([]byte(doc))
	require.NoError(t, err)
	require.Equal(t, "https://hook.example/t?token=abc", c.Receivers[0].Webhook.URL)
	require.Equal(t, "R0UTINGKEY-secret", c.Receivers[1].PagerDuty.RoutingKey)
	masked, err := configstore.Mask(doc)
	require.NoError(t, err)
	require.NotContains(t, masked, "token=abc")
	require.NotContains(t, masked, "R0UTINGKEY-secret")
	require.Contains(t, masked, `"URL": "<masked:hook.example>"`)
	back, err := configstore.Unmask(masked, doc)
	require.NoError(t, err)
	require.Equal(t, doc, back)
	// A mask kept under the other spelling takes the saved secret too.
	edited := strings.Replace(masked, `"URL"`, `"url"`, 1)
	back, err = configstore.Unmask(edited, doc)
	require.NoError(t, err)
	require.Contains(t, back, `"url": "https://hook.example/t?token=abc"`)
}

// maskForm is what a mask looks like: "<masked>", or "<masked:host>" with
// nothing of a URL but its host.
var maskForm = regexp.MustCompile(`^<masked(:[^\x00-\x20\x7f-\x{10FFFF}<>@/\\?#"']+)?>$`)

func FuzzMaskUnmask(f *testing.F) {
	f.Add(docV1)
	f.Add(`{"receivers": [{"name": "a", "slack": {"url": "<masked>"}}]}`)
	f.Add(`[1, {"receivers": 2}]`)
	f.Add(`{"receivers": [{"name": "p", "pagerduty": {"routing_key": "k", "url": "https://u:pw@h.example/x?token=t", "URL": "http://h2"}}]}`)
	f.Add(`{"receivers": [{"name": "m", "email": {"smarthost": "mail:25", "username": "u", "password": "<masked-pw>"}}]}`)
	f.Fuzz(func(t *testing.T, doc string) {
		masked, err := configstore.Mask(doc)
		if err != nil {
			return
		}
		// Every secret in force in the masked document (as encoding/json,
		// and so config.Parse, reads it) is a mask.
		var c config.Config
		if json.Unmarshal([]byte(masked), &c) == nil {
			for i, r := range c.Receivers {
				for _, v := range receiverSecrets(r) {
					if v != "" && !maskForm.MatchString(v) {
						t.Fatalf("receivers[%d]: secret %q shown in\n%s", i, v, masked)
					}
				}
			}
		}
		again, err := configstore.Mask(masked)
		if err != nil || again != masked {
			t.Fatalf("masking a masked document changed it: %v\n%s\n%s", err, masked, again)
		}
		back, err := configstore.Unmask(masked, doc)
		if err != nil {
			// Only a mask the original already held may lack a secret.
			if !strings.Contains(doc, configstore.MaskPrefix) {
				t.Fatalf("unmask of a fresh mask failed: %v", err)
			}
			return
		}
		if !strings.Contains(doc, configstore.MaskPrefix) && back != doc {
			t.Fatalf("round trip changed the document:\n%s\n%s", doc, back)
		}
	})
}

// receiverSecrets lists the secret-bearing values of a receiver.
func receiverSecrets(r config.Receiver) []string {
	var out []string
	if r.PagerDuty != nil {
		out = append(out, r.PagerDuty.RoutingKey, r.PagerDuty.URL)
	}
	if r.Slack != nil {
		out = append(out, r.Slack.URL)
	}
	if r.Webhook != nil {
		out = append(out, r.Webhook.URL)
	}
	if r.Alertmanager != nil {
		out = append(out, r.Alertmanager.URL)
	}
	if r.Email != nil {
		out = append(out, r.Email.Password)
	}
	return out
}

// The summary shown with a saved or loaded version (and returned by the
// settings API that accepts a document) carries the document's warnings:
// a repeat interval below the group interval is saved, not refused, and
// the person who saved it sees why it will not repeat as often as written.
func TestSummaryCarriesConfigWarnings(t *testing.T) {
	c, err := configstore.Version{Document: `{"timing": {"group_interval": "10m"},
	  "receivers": [{"name": "w", "webhook": {"url": "https://hooks.example.com/y"}}]}`}.Config()
	require.NoError(t, err)
	require.Equal(t, []string{"timing.repeat.P0: 5m0s (the default) is below timing.group_interval 10m0s: P0 groups repeat every 10m0s"},
		configstore.Summarize(c).Warnings)
	c, err = configstore.Version{Document: docV1}.Config()
	require.NoError(t, err)
	require.Equal(t, []string{}, configstore.Summarize(c).Warnings)
}
