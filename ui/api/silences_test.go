package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"governor.dev/governor/alerts"
	alertsapi "governor.dev/governor/alerts/api"
	"governor.dev/governor/alerts/manager"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/notify/webhook"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/alerts/store"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui/api"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/model"
)

var s0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

// silenceEnv is the API over a running alerts manager with one firing
// alert (service checkout), requests made by an operator.
type silenceEnv struct {
	h   http.Handler
	m   *manager.Manager
	clk *clock.Fake
	fp  string
}

func newSilenceEnv(t testing.TB) *silenceEnv {
	t.Helper()
	ctx := context.Background()
	hook := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(hook.Close)
	ast, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "a.db"), store.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ast.Close() })
	wh, err := webhook.New(webhook.Config{URL: hook.URL}, hook.Client())
	require.NoError(t, err)
	clk := clock.NewFake(s0)
	m, err := manager.New(ctx, manager.Options{Rules: []rule.Rule{{Name: "Down", Event: "down", Severity: alerts.P1}},
		Store: ast, Clock: clk, Registerer: prometheus.NewRegistry(), Receivers: map[string]notify.Notifier{"hook": wh}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	require.NoError(t, m.Observe(rule.Event{Kind: "down", Service: "checkout", At: s0}))
	require.NoError(t, m.Step(ctx, s0))
	svc, err := alertsapi.New(m, alertsapi.Options{Clock: clk})
	require.NoError(t, err)
	rs, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:", Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rs.Close() })
	a, err := api.New(api.Options{Rules: rs, Clock: clk, Alerts: model.NewMemoryAlerts(clk), AlertService: svc})
	require.NoError(t, err)
	p := &auth.Principal{User: auth.User{Name: "otto"}, Roles: []versioning.Role{versioning.RoleOperator}}
	r := chi.NewRouter()
	r.Use(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
		})
	})
	r.Route("/api/v1", a.Routes)
	st := m.Alerts(s0)
	require.Len(t, st, 1)
	return &silenceEnv{h: r, m: m, clk: clk, fp: st[0].Fingerprint}
}

func (e *silenceEnv) do(method, path, body string) (*httptest.ResponseRecorder, map[string]any) {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	return serve(e.h, r)
}

func at(d time.Duration) string { return s0.Add(d).Format(time.RFC3339) }

// silencedBy is the silence muting the alert, "" if none.
func (e *silenceEnv) silencedBy(t testing.TB) string {
	t.Helper()
	st := e.m.Alerts(e.clk.Now())
	require.Len(t, st, 1)
	return strings.Join(st[0].SilencedBy, ",")
}

// TestSilenceByMatchersCreatedListedAndExpired: POST /api/v1/silences takes
// Alertmanager's silence (matchers, starts_at, ends_at, comment), records
// the person behind the request as its author, and the silence mutes the
// alert; GET lists it with its state; DELETE expires it, 204, and an
// unknown id is 404.
func TestSilenceByMatchersCreatedListedAndExpired(t *testing.T) {
	e := newSilenceEnv(t)
	w, doc := e.do("POST", "/api/v1/silences", `{"matchers": "{service=\"checkout\"}", "ends_at": "`+at(time.Hour)+`", "comment": "deploy"}`)
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	id, _ := doc["id"].(string)
	require.NotEmpty(t, id)
	require.Equal(t, "otto", doc["created_by"])
	require.Equal(t, at(0), doc["starts_at"])
	require.Equal(t, map[string]any{"state": "active"}, doc["status"])
	require.Equal(t, id, e.silencedBy(t))

	w, doc = e.do("GET", "/api/v1/silences", "")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.Len(t, doc["silences"], 1)

	e.clk.Advance(time.Minute)
	w, _ = e.do("DELETE", "/api/v1/silences/"+id, "")
	require.Equal(t, http.StatusNoContent, w.Code, w.Body.String())
	require.Empty(t, e.silencedBy(t))
	w, _ = e.do("DELETE", "/api/v1/silences/nope", "")
	require.Equal(t, http.StatusNotFound, w.Code, w.Body.String())
	w, doc = e.do("GET", "/api/v1/silences?state=expired", "")
	require.Equal(t, http.StatusOK, w.Code)
	list := doc["silences"].([]any)
	require.Len(t, list, 1)
	require.Equal(t, at(time.Minute), list[0].(map[string]any)["ends_at"])
}

// TestSilenceListFiltersByState: ?state= (pending, active, expired, may be
// repeated) keeps the silences in those states; an unknown state is 422
// naming the field.
func TestSilenceListFiltersByState(t *testing.T) {
	e := newSilenceEnv(t)
	for _, b := range []string{
		`{"matchers": "{service=\"checkout\"}", "ends_at": "` + at(time.Hour) + `", "comment": "now"}`,
		`{"matchers": "{service=\"search\"}", "starts_at": "` + at(2*time.Hour) + `", "ends_at": "` + at(3*time.Hour) + `", "comment": "later"}`,
	} {
		w, _ := e.do("POST", "/api/v1/silences", b)
		require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	}
	for q, want := range map[string]int{"": 2, "?state=active": 1, "?state=pending": 1, "?state=pending&state=active": 2, "?state=expired": 0} {
		w, doc := e.do("GET", "/api/v1/silences"+q, "")
		require.Equal(t, http.StatusOK, w.Code, q)
		require.Len(t, doc["silences"], want, q)
	}
	w, doc := e.do("GET", "/api/v1/silences?state=gone", "")
	require.Equal(t, http.StatusUnprocessableEntity, w.Code)
	require.Equal(t, "state", doc["fields"].([]any)[0].(map[string]any)["field"])
}

// TestSilenceEditInPlaceOrExpireAndRecreate: a POST with the id of a
// silence edits it as Alertmanager does: in place (200, same id) when the
// matchers and the start of the active silence stay; otherwise a new
// silence (201) and the old one expired, still listed; an unknown id 404.
// The alert stays silenced throughout.
func TestSilenceEditInPlaceOrExpireAndRecreate(t *testing.T) {
	e := newSilenceEnv(t)
	_, first := e.do("POST", "/api/v1/silences", `{"matchers": "{service=\"checkout\"}", "ends_at": "`+at(time.Hour)+`", "comment": "deploy"}`)
	id := first["id"].(string)
	e.clk.Set(s0.Add(10 * time.Minute))
	w, doc := e.do("POST", "/api/v1/silences", `{"id": "`+id+`", "matchers": "{service=\"checkout\"}", "ends_at": "`+at(2*time.Hour)+`", "comment": "late"}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.Equal(t, id, doc["id"])
	require.Equal(t, at(0), doc["starts_at"])
	require.Equal(t, id, e.silencedBy(t))

	e.clk.Set(s0.Add(20 * time.Minute))
	w, doc = e.do("POST", "/api/v1/silences", `{"id": "`+id+`", "matchers": "{service=~\"checkout|search\"}", "ends_at": "`+at(3*time.Hour)+`", "comment": "both"}`)
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	newID := doc["id"].(string)
	require.NotEqual(t, id, newID)
	require.Equal(t, newID, e.silencedBy(t))
	_, doc = e.do("GET", "/api/v1/silences?state=expired", "")
	require.Len(t, doc["silences"], 1)
	require.Equal(t, id, doc["silences"].([]any)[0].(map[string]any)["id"])

	w, _ = e.do("POST", "/api/v1/silences", `{"id": "nope", "matchers": "{service=\"checkout\"}", "ends_at": "`+at(time.Hour)+`", "comment": "x"}`)
	require.Equal(t, http.StatusNotFound, w.Code, w.Body.String())
}

// TestSilenceByMatchersRefusesBadInputNamingTheField: an end in the past,
// a time that is not RFC 3339, matchers that do not parse, a missing
// comment, an unknown field, a body over 64 KiB, and the short form's
// fields mixed in are refused, nothing is created.
func TestSilenceByMatchersRefusesBadInputNamingTheField(t *testing.T) {
	e := newSilenceEnv(t)
	ok := `"matchers": "{service=\"checkout\"}", "ends_at": "` + at(time.Hour) + `"`
	for _, tc := range []struct {
		name, body string
		status     int
		want       string
	}{
		{"ends in the past", `{"matchers": "{service=\"checkout\"}", "starts_at": "` + at(-2*time.Hour) + `", "ends_at": "` + at(-time.Hour) + `", "comment": "x"}`, 422, "ends_at"},
		{"starts_at not RFC 3339", `{` + ok + `, "starts_at": "2026-03-02 12:00", "comment": "x"}`, 422, `"field":"starts_at"`},
		{"ends_at not RFC 3339", `{"matchers": "{service=\"checkout\"}", "ends_at": "tomorrow", "comment": "x"}`, 422, `"field":"ends_at"`},
		{"matchers do not parse", `{"matchers": "{service=checkout}", "ends_at": "` + at(time.Hour) + `", "comment": "x"}`, 422, `"field":"matchers"`},
		{"no comment", `{` + ok + `}`, 422, "comment"},
		{"unknown field", `{` + ok + `, "comment": "x", "endsAt": "x"}`, 422, `"field":"endsAt"`},
		{"trailing data", `{` + ok + `, "comment": "x"} {}`, 422, "one JSON object"},
		{"service with matchers", `{` + ok + `, "comment": "x", "service": "checkout"}`, 422, `"field":"service"`},
		{"for with ends_at", `{` + ok + `, "comment": "x", "for": "1h"}`, 422, `"field":"for"`},
		{"too large", `{` + ok + `, "comment": "` + strings.Repeat("x", 70<<10) + `"}`, 413, "65536 bytes"},
	} {
		w, _ := e.do("POST", "/api/v1/silences", tc.body)
		require.Equal(t, tc.status, w.Code, "%s: %s", tc.name, w.Body)
		require.Contains(t, w.Body.String(), tc.want, tc.name)
	}
	require.Empty(t, e.m.Silences())
}

// TestAlertHistoryListsStateChanges: GET /api/v1/alerts/{id}/history lists
// the alert's state changes; limit out of 1..1000 is 422 naming it.
func TestAlertHistoryListsStateChanges(t *testing.T) {
	e := newSilenceEnv(t)
	w, doc := e.do("GET", "/api/v1/alerts/"+e.fp+"/history", "")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	hist := doc["history"].([]any)
	require.NotEmpty(t, hist)
	require.Equal(t, "firing", hist[len(hist)-1].(map[string]any)["to"])
	w, doc = e.do("GET", "/api/v1/alerts/"+e.fp+"/history?limit=0", "")
	require.Equal(t, http.StatusUnprocessableEntity, w.Code)
	require.Equal(t, "limit", doc["fields"].([]any)[0].(map[string]any)["field"])
}

// FuzzSilenceBody: no body of POST /api/v1/silences, in either form, is a
// server error.
func FuzzSilenceBody(f *testing.F) {
	for _, s := range []string{`{}`, `{"service":"checkout","for":"1h","comment":"c"}`,
		`{"matchers":"{service=\"checkout\"}","ends_at":"2026-03-02T11:00:00Z","comment":"c"}`,
		`{"id":"x","matchers":"{a=\"b\"}","ends_at":"2026-03-02T11:00:00Z","comment":"c"}`,
		`{"matchers":"{","starts_at":"now"}`, `[`, `{"matchers":"{a=~\"\"}","ends_at":"2030-01-01T00:00:00Z","comment":"c"}`} {
		f.Add(s)
	}
	e := newSilenceEnv(f)
	f.Fuzz(func(t *testing.T, body string) {
		w, _ := e.do("POST", "/api/v1/silences", body)
		if w.Code >= 500 {
			t.Fatalf("status %d for %q: %s", w.Code, body, w.Body)
		}
	})
}

// doIfMatch is do with an If-Match header (none when ifMatch is "").
func (e *silenceEnv) doIfMatch(method, path, ifMatch string) (*httptest.ResponseRecorder, map[string]any) {
	r := httptest.NewRequest(method, path, nil)
	if ifMatch != "" {
		r.Header.Set("If-Match", ifMatch)
	}
	return serve(e.h, r)
}

// TestSilenceExpireIfMatch: a silence is returned with its version, as
// the body's version and a strong ETag; DELETE with If-Match the ETag of
// a version since edited is 409 saying who edited it, and the silence
// stays active; with the current ETag it is expired, 204; without
// If-Match it is expired whatever it became (as before); an If-Match that
// is not one strong ETag is 400 and changes nothing; "*" is no version.
func TestSilenceExpireIfMatch(t *testing.T) {
	e := newSilenceEnv(t)
	w, doc := e.do("POST", "/api/v1/silences", `{"matchers": "{service=\"checkout\"}", "ends_at": "`+at(time.Hour)+`", "comment": "deploy"}`)
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	id, v1 := doc["id"].(string), doc["version"].(string)
	require.NotEmpty(t, v1)
	require.Equal(t, `"`+v1+`"`, w.Header().Get("ETag"))
	require.Equal(t, at(0), doc["updated_at"])

	e.clk.Advance(10 * time.Minute)
	w, doc = e.do("POST", "/api/v1/silences", `{"id": "`+id+`", "matchers": "{service=\"checkout\"}", "ends_at": "`+at(2*time.Hour)+`", "comment": "late"}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	v2 := doc["version"].(string)
	require.NotEqual(t, v1, v2)
	require.Equal(t, `"`+v2+`"`, w.Header().Get("ETag"))

	for _, bad := range []string{v2, `W/"` + v2 + `"`, `"` + v1 + `", "` + v2 + `"`, `"not a version"`, `"`} {
		w, _ = e.doIfMatch("DELETE", "/api/v1/silences/"+id, bad)
		require.Equal(t, http.StatusBadRequest, w.Code, "%s: %s", bad, w.Body)
		require.Contains(t, w.Body.String(), "If-Match", bad)
		require.Equal(t, id, e.silencedBy(t), bad)
	}

	w, doc = e.doIfMatch("DELETE", "/api/v1/silences/"+id, `"`+v1+`"`)
	require.Equal(t, http.StatusConflict, w.Code, w.Body.String())
	msg := doc["error"].(string)
	require.Contains(t, msg, "edited by otto at "+at(10*time.Minute))
	require.Contains(t, msg, "version "+v2)
	require.Equal(t, id, e.silencedBy(t), "a stale expiry ends nothing")

	w, _ = e.doIfMatch("DELETE", "/api/v1/silences/"+id, `"`+v2+`"`)
	require.Equal(t, http.StatusNoContent, w.Code, w.Body.String())
	require.Empty(t, e.silencedBy(t))

	// Expired since: the version read before is refused, saying it ended.
	w, doc = e.doIfMatch("DELETE", "/api/v1/silences/"+id, `"`+v2+`"`)
	require.Equal(t, http.StatusConflict, w.Code, w.Body.String())
	require.Contains(t, doc["error"], "it ended at "+at(10*time.Minute))

	// Without If-Match, or with "*", the silence ends whatever it became.
	for _, ifMatch := range []string{"", "*"} {
		_, doc = e.do("POST", "/api/v1/silences", `{"matchers": "{service=\"checkout\"}", "ends_at": "`+at(time.Hour)+`", "comment": "again"}`)
		id := doc["id"].(string)
		_, _ = e.do("POST", "/api/v1/silences", `{"id": "`+id+`", "matchers": "{service=\"checkout\"}", "ends_at": "`+at(3*time.Hour)+`", "comment": "edited"}`)
		w, _ = e.doIfMatch("DELETE", "/api/v1/silences/"+id, ifMatch)
		require.Equal(t, http.StatusNoContent, w.Code, "%q: %s", ifMatch, w.Body)
		require.Empty(t, e.silencedBy(t), ifMatch)
	}
	w, _ = e.doIfMatch("DELETE", "/api/v1/silences/nope", `"`+v2+`"`)
	require.Equal(t, http.StatusNotFound, w.Code, w.Body.String())
	require.False(t, strings.Contains(w.Header().Get("ETag"), v2))
}

// TestOpenAPIDocumentsSilenceVersions: the document says how to expire a
// silence only as shown: the Silence's version and updated_at, its ETag
// on POST /silences, and If-Match, 400 and 409 on DELETE /silences/{id}.
func TestOpenAPIDocumentsSilenceVersions(t *testing.T) {
	type op struct {
		Parameters []struct {
			Name string `yaml:"name"`
			In   string `yaml:"in"`
		} `yaml:"parameters"`
		Responses map[string]struct {
			Headers map[string]any `yaml:"headers"`
		} `yaml:"responses"`
	}
	var doc struct {
		Paths struct {
			Silences struct {
				Post op `yaml:"post"`
			} `yaml:"/silences"`
			Silence struct {
				Delete op `yaml:"delete"`
			} `yaml:"/silences/{id}"`
		} `yaml:"paths"`
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `yaml:"properties"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	require.NoError(t, yaml.Unmarshal(api.OpenAPI(), &doc))
	del := doc.Paths.Silence.Delete
	require.Len(t, del.Parameters, 1)
	require.Equal(t, "If-Match", del.Parameters[0].Name)
	require.Equal(t, "header", del.Parameters[0].In)
	require.Contains(t, del.Responses, "400")
	require.Contains(t, del.Responses, "409")
	for _, code := range []string{"200", "201"} {
		require.Contains(t, doc.Paths.Silences.Post.Responses[code].Headers, "ETag", code)
	}
	require.Contains(t, doc.Components.Schemas["Silence"].Properties, "version")
	require.Contains(t, doc.Components.Schemas["Silence"].Properties, "updated_at")
}

// FuzzSilenceIfMatch: whatever If-Match says, DELETE /silences/{id}
// answers 204, 400 or 409, never a server error, and ends the silence
// only without a version ("", "*") or with its own version quoted.
func FuzzSilenceIfMatch(f *testing.F) {
	for _, s := range []string{"", "*", `"0123456789abcdef"`, `W/"0123456789abcdef"`, `"a", "b"`, `"`, `""`, " * ", "\x00", `"ABCDEF"`} {
		f.Add(s)
	}
	e := newSilenceEnv(f)
	f.Fuzz(func(t *testing.T, h string) {
		_, doc := e.do("POST", "/api/v1/silences", `{"matchers": "{service=\"checkout\"}", "ends_at": "`+at(time.Hour)+`", "comment": "fuzz"}`)
		id, version := doc["id"].(string), doc["version"].(string)
		r := httptest.NewRequest("DELETE", "/api/v1/silences/"+id, nil)
		r.Header["If-Match"] = []string{h}
		w, _ := serve(e.h, r)
		switch w.Code {
		case http.StatusNoContent:
			require.Contains(t, []string{"", "*", `"` + version + `"`}, strings.TrimSpace(h))
			require.NotContains(t, e.silencedBy(t), id)
		case http.StatusBadRequest, http.StatusConflict:
			require.Contains(t, e.silencedBy(t), id)
			_, _ = e.do("DELETE", "/api/v1/silences/"+id, "")
		default:
			t.Fatalf("If-Match %q: %d %s", h, w.Code, w.Body)
		}
	})
}
