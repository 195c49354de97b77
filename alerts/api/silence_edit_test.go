package api

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// POST /silences with the "id" of a silence edits it, as Alertmanager's
// POST does: an edit Alertmanager makes in place (same matchers, an active
// silence's start kept, an omitted starts_at keeping it) keeps the ID,
// 200; any other edit (other matchers) expires the old silence at once and
// creates a new one, 201, so that the list still shows what muted the
// alert and until when. The alert stays silenced throughout. An edit of an
// expired silence creates a new one and leaves the old as it was; an
// unknown id is 404.
func TestSilenceEditKeepsIDOrExpiresAndReplacesAsAlertmanager(t *testing.T) {
	srv, m, clk := setup(t)
	at := func(d time.Duration) string { return t0.Add(d).Format(time.RFC3339) }
	post := func(body string, status int) map[string]any {
		t.Helper()
		resp, obj, _ := do(t, "POST", srv.URL+"/silences", body)
		if resp.StatusCode != status {
			t.Fatalf("POST /silences %s: %d %v, want %d", body, resp.StatusCode, obj, status)
		}
		return obj
	}
	silencedBy := func() string {
		t.Helper()
		st := m.Alerts(clk.Now())
		if len(st) != 1 {
			t.Fatalf("alerts %+v", st)
		}
		return strings.Join(st[0].SilencedBy, ",")
	}
	first := post(`{"matchers": "{service=\"checkout\"}", "ends_at": "`+at(time.Hour)+`", "comment": "deploy"}`, http.StatusCreated)
	id := first["id"].(string)

	clk.Set(t0.Add(10 * time.Minute))
	longer := post(`{"id": "`+id+`", "matchers": "{service=\"checkout\"}", "ends_at": "`+at(2*time.Hour)+`", "comment": "deploy runs late"}`,
		http.StatusOK)
	if longer["id"] != id || longer["starts_at"] != at(0) || longer["ends_at"] != at(2*time.Hour) ||
		longer["comment"] != "deploy runs late" || longer["created_at"] != at(0) {
		t.Fatalf("edit in place: %v, want id %s starting at %s, ending at %s", longer, id, at(0), at(2*time.Hour))
	}
	if got := silencedBy(); got != id {
		t.Fatalf("silenced by %q, want %q", got, id)
	}

	clk.Set(t0.Add(20 * time.Minute))
	wider := post(`{"id": "`+id+`", "matchers": "{service=~\"checkout|search\"}", "ends_at": "`+at(3*time.Hour)+`", "comment": "both"}`,
		http.StatusCreated)
	newID, _ := wider["id"].(string)
	if newID == "" || newID == id || wider["starts_at"] != at(20*time.Minute) {
		t.Fatalf("edit of the matchers: %v, want a new silence starting now", wider)
	}
	if got := silencedBy(); got != newID {
		t.Fatalf("silenced by %q, want only the new silence %q", got, newID)
	}
	resp, _, list := do(t, "GET", srv.URL+"/silences", "")
	if resp.StatusCode != http.StatusOK || len(list) != 2 {
		t.Fatalf("GET /silences: %d %v, want the old and the new silence", resp.StatusCode, list)
	}
	old := list[0].(map[string]any)
	if old["id"] != id || old["ends_at"] != at(20*time.Minute) || old["status"].(map[string]any)["state"] != "expired" {
		t.Fatalf("old silence %v, want it expired at %s", old, at(20*time.Minute))
	}

	// Editing the expired one creates another silence; the expired one keeps its end.
	again := post(`{"id": "`+id+`", "matchers": "{service=\"checkout\"}", "ends_at": "`+at(time.Hour)+`", "comment": "again"}`,
		http.StatusCreated)
	if again["id"] == id || again["id"] == newID || again["starts_at"] != at(20*time.Minute) {
		t.Fatalf("edit of an expired silence: %v", again)
	}
	if s := m.Silences(); len(s) != 3 || s[0].ID != id || !s[0].EndsAt.Equal(t0.Add(20*time.Minute)) {
		t.Fatalf("silences %+v", s)
	}

	resp, obj, _ := do(t, "POST", srv.URL+"/silences", `{"id": "nope", "matchers": "{service=\"checkout\"}", "ends_at": "`+at(time.Hour)+`", "comment": "x"}`)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(obj["error"].(string), `"nope"`) {
		t.Fatalf("edit of an unknown silence: %d %v, want 404", resp.StatusCode, obj)
	}
	if s := m.Silences(); len(s) != 3 {
		t.Fatalf("a refused edit changed the silences: %+v", s)
	}
}

// A pending silence edited to start later, or earlier but not in the past,
// keeps its ID; one edited to start in the past is replaced by a new
// silence and the pending one is expired without ever muting.
func TestSilenceEditOfPendingSilence(t *testing.T) {
	srv, m, clk := setup(t)
	at := func(d time.Duration) string { return t0.Add(d).Format(time.RFC3339) }
	_, obj, _ := do(t, "POST", srv.URL+"/silences", `{"matchers": "{service=\"checkout\"}", "starts_at": "`+at(time.Hour)+`", "ends_at": "`+
		at(2*time.Hour)+`", "comment": "tonight"}`)
	id := obj["id"].(string)
	resp, obj, _ := do(t, "POST", srv.URL+"/silences", `{"id": "`+id+`", "matchers": "{service=\"checkout\"}", "starts_at": "`+
		at(30*time.Minute)+`", "ends_at": "`+at(2*time.Hour)+`", "comment": "earlier"}`)
	if resp.StatusCode != http.StatusOK || obj["id"] != id || obj["status"].(map[string]any)["state"] != "pending" {
		t.Fatalf("earlier start: %d %v", resp.StatusCode, obj)
	}
	resp, obj, _ = do(t, "POST", srv.URL+"/silences", `{"id": "`+id+`", "matchers": "{service=\"checkout\"}", "starts_at": "`+
		at(-time.Minute)+`", "ends_at": "`+at(2*time.Hour)+`", "comment": "now"}`)
	if resp.StatusCode != http.StatusCreated || obj["id"] == id || obj["status"].(map[string]any)["state"] != "active" {
		t.Fatalf("start in the past: %d %v", resp.StatusCode, obj)
	}
	s := m.Silences()
	if len(s) != 2 || s[1].ID != id || s[1].State(clk.Now()) != "expired" || !s[1].StartsAt.Equal(t0) {
		t.Fatalf("silences %+v, want the pending one expired at %s", s, t0)
	}
}
