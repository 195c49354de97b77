package governor

import (
	"net/http"
	"net/textproto"
	"testing"
)

// TestHeaderMatchesGet: the direct http.Header lookup answers exactly what
// http.Header.Get does for the canonical names the rules produce.
func TestHeaderMatchesGet(t *testing.T) {
	names := []string{"X-Traffic-Priority", "X-User-Id", "X-Caller", textproto.CanonicalMIMEHeaderKey("x-odd key")}
	tests := []struct {
		name string
		h    http.Header
	}{
		{"empty", http.Header{}},
		{"set", func() http.Header {
			h := http.Header{}
			h.Set("x-traffic-priority", "critical")
			h.Add("X-User-Id", "u1")
			h.Add("X-User-Id", "u2")
			return h
		}()},
		{"raw canonical", http.Header{"X-Caller": {"billing"}}},
		{"raw lower case is not found by Get either", http.Header{"x-caller": {"billing"}}},
		{"empty value list", http.Header{"X-Traffic-Priority": {}}},
		{"empty value", http.Header{"X-Traffic-Priority": {""}}},
		{"odd key", http.Header{textproto.CanonicalMIMEHeaderKey("x-odd key"): {"v"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Request{Header: tt.h}
			for _, n := range names {
				if got, want := r.header(n), tt.h.Get(n); got != want {
					t.Errorf("header(%q) = %q, Get = %q", n, got, want)
				}
			}
		})
	}
}
