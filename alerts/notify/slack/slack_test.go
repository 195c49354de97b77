package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// Slack refuses a message with more than 100 attachments.
func TestLargeGroupStaysWithinSlackAttachmentLimit(t *testing.T) {
	var as []notify.Alert
	for i := range 150 {
		l := alerts.Labels{"alertname": "BreakerOpen", "instance": fmt.Sprint(i), "severity": "P2"}
		as = append(as, notify.Alert{Alert: alerts.Alert{Labels: l}, Status: notify.StatusFiring, Fingerprint: l.Fingerprint().String()})
	}
	m := notify.NewMessage(notify.KindNotify, "team", "k", alerts.Labels{"alertname": "BreakerOpen"}, as, notifytest.Sample(notify.KindNotify).CreatedAt)
	if got := len(Build(m, "").Attachments); got > 100 {
		t.Fatalf("%d attachments: Slack refuses a message with more than 100 (too_many_attachments)", got)
	}
}
