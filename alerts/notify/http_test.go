package notify

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
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

// A 429 or 503 with Retry-After gives a *StatusError holding the wait the
// receiver asked for: delay-seconds, or an HTTP date measured against the
// response's Date (or, without one, against the caller's clock through
// Wait), never more than MaxRetryAfter. Other statuses, and headers that do
// not parse, ask for nothing.
func TestPostJSONReadsRetryAfter(t *testing.T) {
	date := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		status     int
		retryAfter string
		noDate     bool
		want       time.Duration // Wait at date
	}{
		{"seconds on 429", http.StatusTooManyRequests, "30", false, 30 * time.Second},
		{"seconds on 503", http.StatusServiceUnavailable, " 7 ", false, 7 * time.Second},
		{"http date against Date", http.StatusTooManyRequests, date.Add(90 * time.Second).Format(http.TimeFormat), false, 90 * time.Second},
		{"http date without Date", http.StatusTooManyRequests, date.Add(2 * time.Minute).Format(http.TimeFormat), true, 2 * time.Minute},
		{"http date past", http.StatusServiceUnavailable, date.Add(-time.Minute).Format(http.TimeFormat), false, 0},
		{"bounded", http.StatusTooManyRequests, "86400", false, MaxRetryAfter},
		{"huge", http.StatusTooManyRequests, "99999999999999999999", false, MaxRetryAfter},
		{"negative", http.StatusTooManyRequests, "-5", false, 0},
		{"garbage", http.StatusTooManyRequests, "soon", false, 0},
		{"absent", http.StatusTooManyRequests, "", false, 0},
		{"ignored on 500", http.StatusInternalServerError, "30", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.noDate {
					w.Header()["Date"] = nil
				} else {
					w.Header().Set("Date", date.Format(http.TimeFormat))
				}
				if tt.retryAfter != "" {
					w.Header().Set("Retry-After", tt.retryAfter)
				}
				w.WriteHeader(tt.status)
			}))
			defer srv.Close()
			retry, err := PostJSON(context.Background(), srv.Client(), srv.URL, nil, map[string]string{})
			var se *StatusError
			if !retry || !errors.As(err, &se) || !errors.Is(err, ErrDelivery) || se.StatusCode != tt.status {
				t.Fatalf("retry %v, err %v: want a retryable *StatusError %d wrapping ErrDelivery", retry, err, tt.status)
			}
			if got := se.Wait(date); got != tt.want {
				t.Fatalf("Wait = %s, want %s (error %+v)", got, tt.want, se)
			}
		})
	}
}

// A StatusError made by another Notifier (without PostJSON) reads and wraps
// ErrDelivery too (TestQueueHonoursRetryAfter uses one).
func TestStatusErrorMadeElsewhere(t *testing.T) {
	err := error(&StatusError{StatusCode: 429, RetryAfter: 10 * time.Second})
	if !errors.Is(err, ErrDelivery) || !strings.Contains(err.Error(), "status 429") {
		t.Fatalf("%v", err)
	}
}

// TestPostJSONRetriesWhatMayPassNextTime: a request timeout (408), a 429
// and 5xx are worth another attempt; other refusals are final.
func TestPostJSONRetriesWhatMayPassNextTime(t *testing.T) {
	for code, want := range map[int]bool{http.StatusRequestTimeout: true, http.StatusTooManyRequests: true,
		http.StatusBadGateway: true, http.StatusServiceUnavailable: true, http.StatusBadRequest: false,
		http.StatusUnauthorized: false, http.StatusNotFound: false} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(code) }))
		retry, err := PostJSON(context.Background(), nil, srv.URL, nil, map[string]string{})
		srv.Close()
		if err == nil || retry != want {
			t.Errorf("status %d: retry %v err %v, want retry %v", code, retry, err, want)
		}
	}
}

// TestPostJSONDoesNotFollowRedirectsWithTheDefaultClient: a redirect is a
// failed delivery, never followed, with the client PostJSON makes for nil.
func TestPostJSONDoesNotFollowRedirectsWithTheDefaultClient(t *testing.T) {
	reached := 0
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached++ }))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL, http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	if _, err := PostJSON(context.Background(), nil, srv.URL, nil, map[string]string{}); err == nil || reached != 0 {
		t.Errorf("err %v, %d requests reached the other host", err, reached)
	}
}
