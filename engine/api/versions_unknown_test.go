package api

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"governor.dev/governor/rules/versioning/sqlite"
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
