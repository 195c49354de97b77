package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/rules"
)

// TestVersionsOfUnknownService: an unknown service is 404 for its versions
// as for itself (the package's promise), and a bad name is refused.
func TestVersionsOfUnknownService(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv := httptest.NewServer(Handler(Options{Evaluations: fakeEval{}, Versions: st}))
	defer srv.Close()
	for _, path := range []string{"/engine/api/v1/services/nosuch", "/engine/api/v1/services/nosuch/versions", "/engine/api/v1/services/Bad%20Name/versions"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := http.StatusNotFound
		if strings.Contains(path, "Bad") {
			want = http.StatusBadRequest
		}
		if resp.StatusCode != want && !(want == http.StatusBadRequest && resp.StatusCode == http.StatusUnprocessableEntity) {
			t.Errorf("GET %s: %d %s; want %d", path, resp.StatusCode, body, want)
		}
	}
}

// TestVersionsPageBelowBefore: a service's versions are paged newest first,
// the next page starting below the last number of the one before; a bad
// before is refused naming the parameter.
func TestVersionsPageBelowBefore(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range 3 {
		if _, err := st.Propose(ctx, versioning.Proposal{Ruleset: &rules.Ruleset{Service: "checkout"},
			Author: versioning.Actor{Name: "alice", Roles: []versioning.Role{versioning.RoleOperator}},
			Reason: fmt.Sprintf("change %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(Handler(Options{Evaluations: fakeEval{}, Versions: st}))
	defer srv.Close()
	page := func(query string) (int, []int64, string) {
		resp, err := http.Get(srv.URL + "/engine/api/v1/services/checkout/versions" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var got struct {
			Versions []struct {
				Number int64 `json:"number"`
			} `json:"versions"`
		}
		_ = json.Unmarshal(body, &got)
		var ns []int64
		for _, v := range got.Versions {
			ns = append(ns, v.Number)
		}
		return resp.StatusCode, ns, string(body)
	}
	if code, ns, body := page("?limit=2"); code != 200 || fmt.Sprint(ns) != "[3 2]" {
		t.Fatalf("first page: %d %v %s", code, ns, body)
	}
	if code, ns, body := page("?limit=2&before=2"); code != 200 || fmt.Sprint(ns) != "[1]" {
		t.Fatalf("next page: %d %v %s", code, ns, body)
	}
	for _, bad := range []string{"?before=0", "?before=x"} {
		if code, _, body := page(bad); code != http.StatusBadRequest || !strings.Contains(body, "before") {
			t.Errorf("%s: %d %s, want 400 naming before", bad, code, body)
		}
	}
}
