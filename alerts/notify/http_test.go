package notify

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestPostJSONErrorsDoNotShowTheURLSecret(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	const secret = "/services/T000/B000/XXXXSECRET?token=abc"
	_, err := PostJSON(context.Background(), srv.Client(), srv.URL+secret, nil, map[string]string{})
	if err == nil || strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "token") {
		t.Fatalf("status error shows the URL's secret: %v", err)
	}
	// A transport error (nothing listens).
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	_, err = PostJSON(context.Background(), nil, "http://"+addr+secret, nil, map[string]string{})
	if err == nil || strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "token") {
		t.Fatalf("transport error shows the URL's secret: %v", err)
	}
}
