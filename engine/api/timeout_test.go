package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/rules/distribution"
)

// hungLedger is a ledger whose database stopped answering: a read ends only
// with its context.
type hungLedger struct{}

func (hungLedger) Instances(ctx context.Context, _ string) ([]distribution.Instance, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestReadThatHangsFailsAfterTheTimeout: a request whose read the database
// does not answer ends after Options.Timeout with 503 and an error body
// saying it timed out; it used to run until the client gave up, holding a
// database connection (and a goroutine) per dashboard refresh.
func TestReadThatHangsFailsAfterTheTimeout(t *testing.T) {
	h := Handler(Options{Evaluations: fakeEval{}, Ledger: hungLedger{}, Timeout: 20 * time.Millisecond})
	for _, path := range []string{Prefix + "/ledger", Prefix + "/ledger?service=checkout"} {
		done := make(chan *httptest.ResponseRecorder, 1)
		go func() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
			done <- w
		}()
		select {
		case w := <-done:
			var body struct{ Error string }
			if w.Code != http.StatusServiceUnavailable || json.Unmarshal(w.Body.Bytes(), &body) != nil || !strings.Contains(body.Error, "timed out after 20ms") {
				t.Fatalf("%s: %d %s, want 503 with an error saying it timed out", path, w.Code, w.Body)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: a request whose read hangs never ends", path)
		}
	}
}
