package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"

	"governor.dev/governor/alerts/configstore"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui/api"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/model"
)

// countingStore counts the list queries the API makes.
type countingStore struct {
	versioning.Store
	lists, audits atomic.Int32
}

func (s *countingStore) List(ctx context.Context, f versioning.ListFilter) ([]versioning.Version, error) {
	s.lists.Add(1)
	return s.Store.List(ctx, f)
}

func (s *countingStore) Audit(ctx context.Context, f versioning.AuditFilter) ([]versioning.AuditEntry, error) {
	s.audits.Add(1)
	return s.Store.Audit(ctx, f)
}

// routingVersions is an alerting configuration of n versions, numbered
// 1..n, listed as the store lists them (newest first, at most 1000).
type routingVersions struct {
	model.AlertRouting
	n     int64
	lists atomic.Int32
}

// ListPage lists the versions below o.Before as the store does (at
// most 1000).
func (r *routingVersions) ListPage(_ context.Context, o configstore.ListOptions) ([]configstore.Version, error) {
	r.lists.Add(1)
	limit := min(o.Limit, 1000)
	top := r.n
	if o.Before > 0 {
		top = min(top, o.Before-1)
	}
	var out []configstore.Version
	for n := top; n >= 1 && len(out) < limit; n-- {
		out = append(out, configstore.Version{Number: n, Document: `{}`, Author: "ada"})
	}
	return out, nil
}

type pagingEnv struct {
	h       http.Handler
	st      *countingStore
	routing *routingVersions
}

func newPagingEnv(t *testing.T, alertingVersions int64) *pagingEnv {
	t.Helper()
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	sq, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:", Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sq.Close() })
	e := &pagingEnv{st: &countingStore{Store: sq}, routing: &routingVersions{n: alertingVersions}}
	a, err := api.New(api.Options{Rules: e.st, AlertRouting: e.routing, Clock: clk})
	require.NoError(t, err)
	p := &auth.Principal{User: auth.User{Name: "ada"}, Roles: []versioning.Role{versioning.RoleAdmin}}
	r := chi.NewRouter()
	r.Use(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
		})
	})
	r.Route("/api/v1", a.Routes)
	e.h = r
	return e
}

func (e *pagingEnv) get(t *testing.T, path string) map[string]any {
	t.Helper()
	w, doc := serve(e.h, httptest.NewRequest("GET", path, nil))
	require.Equal(t, http.StatusOK, w.Code, "%s: %s", path, w.Body)
	return doc
}

func (e *pagingEnv) audit(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		_, err := e.st.RecordAudit(context.Background(), versioning.AuditRecord{Actor: versioning.Actor{Name: "ada"}, Action: "note", Service: "checkout",
			Detail: []byte(fmt.Sprintf(`{"i":%d}`, i))})
		require.NoError(t, err)
	}
}

func (e *pagingEnv) propose(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		body := fmt.Sprintf(`{"base_version":0,"reason":"r%d","ruleset":{"service":"checkout","routes":[{"name":"api","match":{"path_prefix":"/api"},"rate_limit":{"rate":%d,"burst":10}}]}}`, i, i+1)
		w, _ := serve(e.h, httptest.NewRequest("POST", "/api/v1/services/checkout/versions", strings.NewReader(body)))
		require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	}
}

func seqs(t *testing.T, doc map[string]any, key, field string) []float64 {
	t.Helper()
	var out []float64
	for _, it := range doc[key].([]any) {
		out = append(out, it.(map[string]any)[field].(float64))
	}
	return out
}

// TestVersionsPageSaysWhetherAnotherFollows: each page of a service's
// versions says whether more follow and, if so, the before to pass for
// them, from one query; the last page says no more, so no client fetches
// an empty page.
func TestVersionsPageSaysWhetherAnotherFollows(t *testing.T) {
	e := newPagingEnv(t, 0)
	e.propose(t, 5)
	e.st.lists.Store(0)
	doc := e.get(t, "/api/v1/services/checkout/versions?limit=2")
	require.Equal(t, []float64{5, 4}, seqs(t, doc, "versions", "number"))
	require.Equal(t, true, doc["more"])
	require.EqualValues(t, 4, doc["next_before"])
	require.EqualValues(t, 1, e.st.lists.Load(), "one query per page")

	doc = e.get(t, "/api/v1/services/checkout/versions?limit=2&before=4")
	require.Equal(t, []float64{3, 2}, seqs(t, doc, "versions", "number"))
	require.Equal(t, true, doc["more"])
	require.EqualValues(t, 2, doc["next_before"])

	doc = e.get(t, "/api/v1/services/checkout/versions?limit=2&before=2")
	require.Equal(t, []float64{1}, seqs(t, doc, "versions", "number"))
	require.Equal(t, false, doc["more"])
	require.NotContains(t, doc, "next_before")

	doc = e.get(t, "/api/v1/services/checkout/versions?limit=5")
	require.Len(t, doc["versions"], 5)
	require.Equal(t, false, doc["more"], "exactly limit left: no further page")

	doc = e.get(t, "/api/v1/services/checkout/versions")
	require.Len(t, doc["versions"], 5)
	require.Equal(t, false, doc["more"], "without limit too")
}

// TestAuditPageSaysWhetherAnotherFollows: the audit log's pages, newest
// first (paged by before) or oldest first (paged by after), say whether
// more follow and the cursor to pass for them, from one query each.
func TestAuditPageSaysWhetherAnotherFollows(t *testing.T) {
	e := newPagingEnv(t, 0)
	e.audit(t, 5)
	e.st.audits.Store(0)
	doc := e.get(t, "/api/v1/audit?limit=2")
	require.Equal(t, []float64{5, 4}, seqs(t, doc, "entries", "seq"))
	require.Equal(t, true, doc["more"])
	require.EqualValues(t, 4, doc["next_before"])
	require.NotContains(t, doc, "next_after")
	require.EqualValues(t, 1, e.st.audits.Load(), "one query per page")
	doc = e.get(t, "/api/v1/audit?limit=2&before=2")
	require.Equal(t, []float64{1}, seqs(t, doc, "entries", "seq"))
	require.Equal(t, false, doc["more"])
	require.NotContains(t, doc, "next_before")

	doc = e.get(t, "/api/v1/audit?order=oldest&limit=3")
	require.Equal(t, []float64{1, 2, 3}, seqs(t, doc, "entries", "seq"))
	require.Equal(t, true, doc["more"])
	require.EqualValues(t, 3, doc["next_after"])
	require.NotContains(t, doc, "next_before")
	doc = e.get(t, "/api/v1/audit?order=oldest&limit=3&after=3")
	require.Equal(t, []float64{4, 5}, seqs(t, doc, "entries", "seq"))
	require.Equal(t, false, doc["more"])

	doc = e.get(t, "/api/v1/audit?order=oldest&after=1&before=5&limit=3")
	require.Equal(t, []float64{2, 3, 4}, seqs(t, doc, "entries", "seq"))
	require.Equal(t, false, doc["more"], "the window ends at before")
}

// syntheticAudit is an audit log of n entries, seq 1..n, answered as the
// stores answer (at most 1000 rows a query).
type syntheticAudit struct {
	versioning.Store
	n       int64
	queries atomic.Int32
}

func (s *syntheticAudit) Audit(_ context.Context, f versioning.AuditFilter) ([]versioning.AuditEntry, error) {
	s.queries.Add(1)
	limit := min(f.Limit, 1000)
	var out []versioning.AuditEntry
	in := func(seq int64) bool { return seq > f.AfterSeq && (f.BeforeSeq == 0 || seq < f.BeforeSeq) }
	for i := int64(1); i <= s.n && len(out) < limit; i++ {
		seq := i
		if f.Newest {
			seq = s.n + 1 - i
		}
		if in(seq) {
			out = append(out, versioning.AuditEntry{Seq: seq})
		}
	}
	return out, nil
}

// TestFullPageOfTheMostEntriesSaysWhetherAnotherFollows: a page of the
// largest limit, for which the store returns no extra row, still says
// whether more follow (with one more one-row query).
func TestFullPageOfTheMostEntriesSaysWhetherAnotherFollows(t *testing.T) {
	e := newPagingEnv(t, 1001)
	log := &syntheticAudit{Store: e.st.Store, n: 1001}
	e.st.Store = log
	doc := e.get(t, "/api/v1/audit?limit=1000")
	require.Len(t, doc["entries"], 1000)
	require.Equal(t, true, doc["more"])
	require.EqualValues(t, 2, doc["next_before"])
	require.EqualValues(t, 2, log.queries.Load())
	doc = e.get(t, "/api/v1/audit?limit=1000&order=oldest&after=1")
	require.Len(t, doc["entries"], 1000)
	require.Equal(t, false, doc["more"])
	doc = e.get(t, "/api/v1/audit?limit=1000&order=oldest")
	require.Equal(t, true, doc["more"])
	require.EqualValues(t, 1000, doc["next_after"])

	doc = e.get(t, "/api/v1/settings/alerting/versions?limit=1000")
	require.Len(t, doc["versions"], 1000)
	require.Equal(t, true, doc["more"])
	e.routing.n = 1000
	doc = e.get(t, "/api/v1/settings/alerting/versions?limit=1000")
	require.Equal(t, false, doc["more"])
}

// TestAlertingVersionsPageSaysWhetherMoreFollow: the alerting
// configuration's versions say whether older ones follow, from one query.
func TestAlertingVersionsPageSaysWhetherMoreFollow(t *testing.T) {
	e := newPagingEnv(t, 3)
	doc := e.get(t, "/api/v1/settings/alerting/versions?limit=2")
	require.Equal(t, []float64{3, 2}, seqs(t, doc, "versions", "number"))
	require.Equal(t, true, doc["more"])
	require.EqualValues(t, 1, e.routing.lists.Load())
	doc = e.get(t, "/api/v1/settings/alerting/versions?limit=3")
	require.Equal(t, false, doc["more"])
	doc = e.get(t, "/api/v1/settings/alerting/versions")
	require.Len(t, doc["versions"], 3)
	require.Equal(t, false, doc["more"])
}

// TestPagingParametersOutOfRangeAreRefusedNamingThem: a limit outside
// 1..1000 (it was cut to 1000 silently, so a short page looked like the
// last) or a cursor that is not a positive integer is refused, naming the
// parameter and its range.
func TestPagingParametersOutOfRangeAreRefusedNamingThem(t *testing.T) {
	e := newPagingEnv(t, 0)
	for _, tc := range []struct{ path, field, problem string }{
		{"/api/v1/services/checkout/versions?limit=1001", "limit", `must be an integer between 1 and 1000, got "1001"`},
		{"/api/v1/services/checkout/versions?limit=0", "limit", `must be an integer between 1 and 1000, got "0"`},
		{"/api/v1/services/checkout/versions?before=x", "before", `must be a positive integer, got "x"`},
		{"/api/v1/audit?limit=5000", "limit", `must be an integer between 1 and 1000, got "5000"`},
		{"/api/v1/audit?limit=ten", "limit", `must be an integer between 1 and 1000, got "ten"`},
		{"/api/v1/audit?after=-1", "after", `must be a positive integer, got "-1"`},
		{"/api/v1/settings/alerting/versions?limit=1001", "limit", `must be an integer between 1 and 1000, got "1001"`},
	} {
		w, doc := serve(e.h, httptest.NewRequest("GET", tc.path, nil))
		require.Equal(t, http.StatusUnprocessableEntity, w.Code, tc.path)
		require.Equal(t, []any{map[string]any{"field": tc.field, "problem": tc.problem}}, doc["fields"], tc.path)
		require.Contains(t, doc["error"], tc.field+": "+tc.problem, tc.path)
	}
	w, doc := serve(e.h, httptest.NewRequest("GET", "/api/v1/audit?limit=0&before=0&order=up", nil))
	require.Equal(t, http.StatusUnprocessableEntity, w.Code)
	require.Len(t, doc["fields"], 3, "every bad parameter at once: %v", doc["fields"])
	w, doc = serve(e.h, httptest.NewRequest("GET", "/api/v1/services/checkout/versions?state=bogus&limit=0&before=0", nil))
	require.Equal(t, http.StatusUnprocessableEntity, w.Code)
	require.Len(t, doc["fields"], 3, "every bad parameter at once: %v", doc["fields"])
}

// TestAlertingVersionsPageOnWithBefore: the alerting configuration's
// versions page on as a service's versions do: next_before when older
// ones follow, before to ask for them, one query a page.
func TestAlertingVersionsPageOnWithBefore(t *testing.T) {
	e := newPagingEnv(t, 5)
	doc := e.get(t, "/api/v1/settings/alerting/versions?limit=2")
	require.Equal(t, []float64{5, 4}, seqs(t, doc, "versions", "number"))
	require.Equal(t, true, doc["more"])
	require.EqualValues(t, 4, doc["next_before"])
	require.EqualValues(t, 1, e.routing.lists.Load(), "one query per page")

	doc = e.get(t, "/api/v1/settings/alerting/versions?limit=2&before=4")
	require.Equal(t, []float64{3, 2}, seqs(t, doc, "versions", "number"))
	require.Equal(t, true, doc["more"])
	require.EqualValues(t, 2, doc["next_before"])

	doc = e.get(t, "/api/v1/settings/alerting/versions?limit=2&before=2")
	require.Equal(t, []float64{1}, seqs(t, doc, "versions", "number"))
	require.Equal(t, false, doc["more"])
	require.NotContains(t, doc, "next_before")

	doc = e.get(t, "/api/v1/settings/alerting/versions?before=1")
	require.Empty(t, doc["versions"])
	require.Equal(t, false, doc["more"])

	w, doc := serve(e.h, httptest.NewRequest("GET", "/api/v1/settings/alerting/versions?before=0", nil))
	require.Equal(t, http.StatusUnprocessableEntity, w.Code)
	require.Equal(t, []any{map[string]any{"field": "before", "problem": `must be a positive integer, got "0"`}}, doc["fields"])
}

// TestFullPageOfTheMostAlertingVersionsBelowBeforeSaysWhetherMoreFollow:
// a page of 1000 versions below a cursor says whether older ones follow.
func TestFullPageOfTheMostAlertingVersionsBelowBeforeSaysWhetherMoreFollow(t *testing.T) {
	e := newPagingEnv(t, 2500)
	doc := e.get(t, "/api/v1/settings/alerting/versions?limit=1000&before=1500")
	require.Len(t, doc["versions"], 1000)
	require.Equal(t, true, doc["more"])
	require.EqualValues(t, 500, doc["next_before"])
	doc = e.get(t, "/api/v1/settings/alerting/versions?limit=1000&before=1001")
	require.Len(t, doc["versions"], 1000)
	require.Equal(t, false, doc["more"])
}
