package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/manager"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/notify/webhook"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/alerts/store"
	"governor.dev/governor/sdk/clock"
)

var t0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

func setup(t *testing.T) (*httptest.Server, *manager.Manager, *clock.Fake) {
	t.Helper()
	hook := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(hook.Close)
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "a.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	wh, _ := webhook.New(webhook.Config{URL: hook.URL}, hook.Client())
	clk := clock.NewFake(t0)
	m, err := manager.New(ctx, manager.Options{Rules: []rule.Rule{{Name: "Down", Event: "down", Severity: alerts.P1}},
		Store: st, Clock: clk, Registerer: prometheus.NewRegistry(), Receivers: map[string]notify.Notifier{"hook": wh}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	if err := m.Observe(rule.Event{Kind: "down", Service: "checkout", At: t0}); err != nil {
		t.Fatal(err)
	}
	if err := m.Step(ctx, t0); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(m, Options{Clock: clk, Author: func(r *http.Request) string { return r.Header.Get("X-User") }}))
	t.Cleanup(srv.Close)
	return srv, m, clk
}

func do(t *testing.T, method, url, body string) (*http.Response, map[string]any, []any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("X-User", "ops@example.com")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v any
	_ = json.NewDecoder(resp.Body).Decode(&v)
	obj, _ := v.(map[string]any)
	list, _ := v.([]any)
	return resp, obj, list
}

func TestAlertsAckAndHistory(t *testing.T) {
	srv, _, _ := setup(t)
	resp, _, list := do(t, "GET", srv.URL+"/alerts", "")
	if resp.StatusCode != 200 || len(list) != 1 {
		t.Fatalf("GET /alerts: %d %v", resp.StatusCode, list)
	}
	fp := list[0].(map[string]any)["fingerprint"].(string)
	tests := []struct {
		name, method, path, body string
		status                   int
		check                    func(map[string]any) bool
	}{
		{"ack", "POST", "/alerts/" + fp + "/ack", `{"comment": "on it"}`, 200,
			func(o map[string]any) bool { return o["by"] == "ops@example.com" && o["comment"] == "on it" }},
		{"ack unknown alert", "POST", "/alerts/00000000000000ff/ack", `{"comment": "x"}`, 404, nil},
		{"ack bad fingerprint", "POST", "/alerts/zz/ack", `{}`, 400, nil},
		{"ack unknown field", "POST", "/alerts/" + fp + "/ack", `{"bogus": 1}`, 400,
			func(o map[string]any) bool { return strings.Contains(o["error"].(string), "unknown field") }},
		{"history bad limit", "GET", "/alerts/" + fp + "/history?limit=0", "", 400, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, obj, _ := do(t, tt.method, srv.URL+tt.path, tt.body)
			if resp.StatusCode != tt.status || (tt.check != nil && !tt.check(obj)) {
				t.Fatalf("%s %s: %d %v, want %d", tt.method, tt.path, resp.StatusCode, obj, tt.status)
			}
		})
	}
	resp, _, list = do(t, "GET", srv.URL+"/alerts", "")
	if resp.StatusCode != 200 || list[0].(map[string]any)["acknowledged"] == nil {
		t.Fatalf("acknowledgement not shown: %v", list)
	}
	resp, _, list = do(t, "GET", srv.URL+"/alerts/"+fp+"/history", "")
	if resp.StatusCode != 200 || len(list) != 2 { // pending, firing
		t.Fatalf("history: %d %v", resp.StatusCode, list)
	}
}

func TestSilences(t *testing.T) {
	srv, m, clk := setup(t)
	end := t0.Add(time.Hour).Format(time.RFC3339)
	resp, obj, _ := do(t, "POST", srv.URL+"/silences", `{"matchers": "{service=\"checkout\"}", "ends_at": "`+end+`", "comment": "deploy"}`)
	if resp.StatusCode != 201 || obj["created_by"] != "ops@example.com" || obj["id"] == "" {
		t.Fatalf("POST /silences: %d %v", resp.StatusCode, obj)
	}
	id := obj["id"].(string)
	resp, obj, _ = do(t, "POST", srv.URL+"/silences", `{"matchers": "{service=checkout}", "ends_at": "`+end+`", "comment": "x"}`)
	if resp.StatusCode != 400 || !strings.Contains(obj["error"].(string), "position 9") {
		t.Fatalf("bad matcher: %d %v", resp.StatusCode, obj)
	}
	resp, obj, _ = do(t, "POST", srv.URL+"/silences", `{"matchers": "{service=\"checkout\"}", "ends_at": "`+end+`"}`)
	if resp.StatusCode != 400 || !strings.Contains(obj["error"].(string), "comment") {
		t.Fatalf("silence without comment: %d %v", resp.StatusCode, obj)
	}
	if st := m.Alerts(clk.Now()); len(st) != 1 || len(st[0].SilencedBy) != 1 {
		t.Fatalf("silence not applied: %+v", st)
	}
	clk.Advance(time.Minute)
	if resp, _, _ := do(t, "DELETE", srv.URL+"/silences/"+id, ""); resp.StatusCode != 204 {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
	if resp, _, _ := do(t, "DELETE", srv.URL+"/silences/nope", ""); resp.StatusCode != 404 {
		t.Fatalf("DELETE unknown: %d", resp.StatusCode)
	}
	resp, _, list := do(t, "GET", srv.URL+"/silences", "")
	if resp.StatusCode != 200 || len(list) != 1 || list[0].(map[string]any)["ends_at"] != t0.Add(time.Minute).Format(time.RFC3339) {
		t.Fatalf("GET /silences: %v", list)
	}
}

// A silence whose end is already past (a mistyped date) would mute
// nothing: POST /silences refuses it with 400 naming ends_at, as
// Alertmanager does, rather than 201 and an alert still paging.
func TestSilenceEndingInThePastRefused(t *testing.T) {
	srv, m, clk := setup(t)
	start := t0.Add(-2 * time.Hour).Format(time.RFC3339)
	end := t0.Add(-time.Hour).Format(time.RFC3339)
	resp, obj, _ := do(t, "POST", srv.URL+"/silences",
		`{"matchers": "{service=\"checkout\"}", "starts_at": "`+start+`", "ends_at": "`+end+`", "comment": "deploy"}`)
	if resp.StatusCode != 400 || !strings.Contains(obj["error"].(string), "ends_at") {
		t.Fatalf("POST /silences ending an hour ago: %d %v, want 400 naming ends_at", resp.StatusCode, obj)
	}
	if resp, _, list := do(t, "GET", srv.URL+"/silences", ""); resp.StatusCode != 200 || len(list) != 0 {
		t.Fatalf("GET /silences after the refusal: %d %v", resp.StatusCode, list)
	}
	if st := m.Alerts(clk.Now()); len(st) != 1 || len(st[0].SilencedBy) != 0 {
		t.Fatalf("alerts %+v", st)
	}
}

// A request body is one JSON value: a client that sends two objects (a
// retry glued to the first attempt, a bad concatenation) or anything after
// the value gets 400 naming the trailing data, not 201 for a silence built
// from the first part only. An unknown field (a typo such as "endsAt") is
// refused naming it, and a body over MaxBody says so.
func TestBodyIsOneStrictJSONValue(t *testing.T) {
	srv, m, _ := setup(t)
	_, _, list := do(t, "GET", srv.URL+"/alerts", "")
	fp := list[0].(map[string]any)["fingerprint"].(string)
	end := t0.Add(time.Hour).Format(time.RFC3339)
	sil := `{"matchers": "{service=\"checkout\"}", "ends_at": "` + end + `", "comment": "deploy"}`
	tests := []struct{ name, path, body, want string }{
		{"silence then garbage", "/silences", sil + ` garbage`, "trailing data"},
		{"two silences", "/silences", sil + "\n" + sil, "trailing data"},
		{"silence then a closing brace", "/silences", sil + `}`, "trailing data"},
		{"ack then an object", "/alerts/" + fp + "/ack", `{"comment": "x"} {}`, "trailing data"},
		{"unknown field", "/silences", `{"matchers": "{service=\"checkout\"}", "ends_at": "` + end + `", "comment": "x", "endsAt": "x"}`,
			`unknown field "endsAt"`},
		{"too large", "/alerts/" + fp + "/ack", `{"comment": "` + strings.Repeat("x", 70<<10) + `"}`, "larger than 65536 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, obj, _ := do(t, "POST", srv.URL+tt.path, tt.body)
			if resp.StatusCode != 400 || !strings.Contains(obj["error"].(string), tt.want) {
				t.Fatalf("POST %s: %d %v, want 400 naming %q", tt.path, resp.StatusCode, obj, tt.want)
			}
		})
	}
	if s := m.Silences(); len(s) != 0 {
		t.Fatalf("silences created from refused bodies: %+v", s)
	}
	if resp, _, _ := do(t, "POST", srv.URL+"/silences", sil+" \n"); resp.StatusCode != 201 {
		t.Fatalf("body with trailing white space: %d, want 201", resp.StatusCode)
	}
}

// A silence whose start or end is not an RFC 3339 time ("2026-03-02
// 12:00", "now") is refused with 400 naming the field, not only quoting
// Go's time layout: the SRE sees which of the two times to fix.
func TestSilenceTimeThatDoesNotParseNamesItsField(t *testing.T) {
	srv, m, _ := setup(t)
	end := t0.Add(time.Hour).Format(time.RFC3339)
	tests := []struct{ name, body, want string }{
		{"ends_at with a space", `{"matchers": "{service=\"checkout\"}", "ends_at": "2026-03-02 12:00", "comment": "deploy"}`,
			`ends_at: "2026-03-02 12:00" is not an RFC 3339 time`},
		{"starts_at a word", `{"matchers": "{service=\"checkout\"}", "starts_at": "now", "ends_at": "` + end + `", "comment": "deploy"}`,
			`starts_at: "now" is not an RFC 3339 time`},
		{"ends_at a number", `{"matchers": "{service=\"checkout\"}", "ends_at": 1, "comment": "deploy"}`, "ends_at"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, obj, _ := do(t, "POST", srv.URL+"/silences", tt.body)
			if resp.StatusCode != 400 || !strings.Contains(obj["error"].(string), tt.want) {
				t.Fatalf("POST /silences: %d %v, want 400 naming %q", resp.StatusCode, obj, tt.want)
			}
		})
	}
	if s := m.Silences(); len(s) != 0 {
		t.Fatalf("silences created from refused bodies: %+v", s)
	}
	start := t0.Add(30 * time.Minute).Format(time.RFC3339Nano)
	resp, obj, _ := do(t, "POST", srv.URL+"/silences", `{"matchers": "{service=\"checkout\"}", "starts_at": "`+start+`", "ends_at": "`+end+`", "comment": "deploy"}`)
	if resp.StatusCode != 201 || obj["starts_at"] != t0.Add(30*time.Minute).Format(time.RFC3339) {
		t.Fatalf("POST /silences with both times: %d %v", resp.StatusCode, obj)
	}
}

// The history of a fingerprint without state changes (an alert pruned
// since, a fingerprint copied from another page) is an empty JSON list, as
// the other list endpoints answer, not null, which a client iterating the
// answer fails on.
func TestHistoryWithoutChangesIsAnEmptyList(t *testing.T) {
	srv, _, _ := setup(t)
	resp, err := http.Get(srv.URL + "/alerts/00000000000000ff/history")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || strings.TrimSpace(string(b)) != "[]" {
		t.Fatalf("GET history of an alert without changes: %d %s (%v), want 200 []", resp.StatusCode, b, err)
	}
}

// GET /silences shows each silence's state at the time of the request, as
// Alertmanager's status.state: pending before it starts, active, expired
// from its end (or its early expiry) on. ?state= keeps those in the states
// given; an unknown state is refused, 400, naming the parameter. POST shows
// the state of the new silence.
func TestSilencesListShowsAndFiltersState(t *testing.T) {
	srv, _, clk := setup(t)
	at := func(d time.Duration) string { return t0.Add(d).Format(time.RFC3339) }
	post := func(body string) map[string]any {
		t.Helper()
		resp, obj, _ := do(t, "POST", srv.URL+"/silences", body)
		if resp.StatusCode != 201 {
			t.Fatalf("POST /silences: %d %v", resp.StatusCode, obj)
		}
		return obj
	}
	state := func(o map[string]any) string {
		st, _ := o["status"].(map[string]any)
		s, _ := st["state"].(string)
		return s
	}
	if o := post(`{"matchers": "{service=\"a\"}", "ends_at": "` + at(time.Hour) + `", "comment": "ends"}`); state(o) != "active" {
		t.Fatalf("new silence %v, want active", o)
	}
	if o := post(`{"matchers": "{service=\"b\"}", "starts_at": "` + at(2*time.Hour) + `", "ends_at": "` + at(3*time.Hour) +
		`", "comment": "later"}`); state(o) != "pending" {
		t.Fatalf("new silence %v, want pending", o)
	}
	clk.Set(t0.Add(10 * time.Minute)) // listed after "ends": oldest start first
	expired := post(`{"matchers": "{service=\"c\"}", "ends_at": "` + at(5*time.Hour) + `", "comment": "expired"}`)
	clk.Set(t0.Add(30 * time.Minute))
	if resp, _, _ := do(t, "DELETE", srv.URL+"/silences/"+expired["id"].(string), ""); resp.StatusCode != 204 {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
	list := func(query string) string {
		t.Helper()
		resp, _, l := do(t, "GET", srv.URL+"/silences"+query, "")
		if resp.StatusCode != 200 || l == nil {
			t.Fatalf("GET /silences%s: %d %v", query, resp.StatusCode, l)
		}
		var got []string
		for _, x := range l {
			o := x.(map[string]any)
			got = append(got, o["comment"].(string)+":"+state(o))
		}
		return strings.Join(got, " ")
	}
	tests := []struct {
		at    time.Duration
		query string
		want  string
	}{
		{45 * time.Minute, "", "ends:active expired:expired later:pending"},
		{45 * time.Minute, "?state=active&state=pending", "ends:active later:pending"},
		{time.Hour, "", "ends:expired expired:expired later:pending"}, // ends_at is the first instant not muted
		{150 * time.Minute, "", "ends:expired expired:expired later:active"},
		{150 * time.Minute, "?state=active", "later:active"},
		{150 * time.Minute, "?state=expired", "ends:expired expired:expired"},
		{4 * time.Hour, "?state=pending", ""},
	}
	for _, tt := range tests {
		clk.Set(t0.Add(tt.at))
		if got := list(tt.query); got != tt.want {
			t.Errorf("at %s, GET /silences%s: %q, want %q", tt.at, tt.query, got, tt.want)
		}
	}
	resp, obj, _ := do(t, "GET", srv.URL+"/silences?state=gone", "")
	if resp.StatusCode != 400 || !strings.Contains(obj["error"].(string), `state: "gone"`) {
		t.Fatalf("unknown state: %d %v", resp.StatusCode, obj)
	}
}
