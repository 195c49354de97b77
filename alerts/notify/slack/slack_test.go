package slack

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/notify/notifytest"
)

func TestIncomingWebhook(t *testing.T) {
	got := make(chan Message, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m Message
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			t.Error(err)
		}
		got <- m
	}))
	defer srv.Close()
	n, err := New(Config{URL: srv.URL, Channel: "#ops"}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Notify(context.Background(), notifytest.Sample(notify.KindNotify)); err != nil {
		t.Fatal(err)
	}
	m := <-got
	if m.Channel != "#ops" || !strings.HasPrefix(m.Text, "[P0 FIRING]") || len(m.Attachments) != 2 ||
		m.Attachments[0].Color != "danger" || m.Attachments[1].Color != "good" {
		t.Fatalf("message %+v", m)
	}
	if _, err := New(Config{URL: "mailto:x@y"}, nil); !errors.Is(err, alerts.ErrInvalid) {
		t.Fatal("bad url accepted")
	}
}
