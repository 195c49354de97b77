package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/notify/notifytest"
)

func TestPostsVersion4Payload(t *testing.T) {
	got := make(chan map[string]any, 1)
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p map[string]any
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			t.Error(err)
		}
		got <- p
		w.WriteHeader(status)
	}))
	defer srv.Close()
	n, err := New(Config{URL: srv.URL, MaxAlerts: 1}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Notify(context.Background(), notifytest.Sample(notify.KindNotify)); err != nil {
		t.Fatal(err)
	}
	p := <-got
	for k, want := range map[string]any{"version": "4", "status": "firing", "receiver": "team", "truncatedAlerts": 1.0} {
		if p[k] != want {
			t.Fatalf("%s = %v, want %v (payload %v)", k, p[k], want, p)
		}
	}
	a := p["alerts"].([]any)[0].(map[string]any)
	if a["status"] != "firing" || a["labels"].(map[string]any)["severity"] != "P0" || a["fingerprint"] == "" {
		t.Fatalf("alert %v", a)
	}
	if p["commonLabels"].(map[string]any)["service"] != "checkout" {
		t.Fatalf("commonLabels %v", p["commonLabels"])
	}
	// Acknowledgements are not sent; server errors are retryable, 4xx final.
	if _, err := n.Notify(context.Background(), notifytest.Sample(notify.KindAcknowledge)); err != nil || len(got) != 0 {
		t.Fatal("acknowledge was posted")
	}
	status = http.StatusServiceUnavailable
	if retry, err := n.Notify(context.Background(), notifytest.Sample(notify.KindNotify)); !retry || !errors.Is(err, notify.ErrDelivery) {
		t.Fatalf("503: retry %v err %v", retry, err)
	}
	<-got
	status = http.StatusBadRequest
	if retry, err := n.Notify(context.Background(), notifytest.Sample(notify.KindNotify)); retry || err == nil {
		t.Fatalf("400: retry %v err %v", retry, err)
	}
	<-got
}

func TestRefusesNonHTTPURL(t *testing.T) {
	for _, u := range []string{"ftp://x/y", "unix:///run/x.sock", ""} {
		if _, err := New(Config{URL: u}, nil); !errors.Is(err, alerts.ErrInvalid) {
			t.Fatalf("%q accepted: %v", u, err)
		}
	}
}
