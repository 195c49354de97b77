package alertmanager

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

func TestPostsToAPIv2(t *testing.T) {
	got := make(chan []PostableAlert, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v2/alerts" || r.Method != http.MethodPost {
			t.Errorf("%s %s", r.Method, r.URL.Path)
		}
		var p []PostableAlert
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			t.Error(err)
		}
		got <- p
	}))
	defer srv.Close()
	n, err := New(Config{URL: srv.URL + "/"}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Notify(context.Background(), notifytest.Sample(notify.KindNotify)); err != nil {
		t.Fatal(err)
	}
	p := <-got
	if len(p) != 2 || !p[0].EndsAt.IsZero() || p[1].EndsAt.IsZero() || p[0].Labels["severity"] != "P0" {
		t.Fatalf("body %+v", p)
	}
	if _, err := New(Config{URL: "tcp://am:9093"}, nil); !errors.Is(err, alerts.ErrInvalid) {
		t.Fatalf("bad scheme accepted: %v", err)
	}
}
