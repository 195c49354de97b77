package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
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

// Labels and annotations are escaped as Slack requires (&amp; &lt; &gt;):
// "p99 > 2s" shows as written, "<!channel>" in a summary notifies nobody and
// a label value with < or & does not break the text line. Entities already
// in the text are escaped too, so they show as typed.
func TestSlackEscapesLabelsAndAnnotations(t *testing.T) {
	l := alerts.Labels{"alertname": "Latency", "service": "a<b>&c", "severity": "P1"}
	as := []notify.Alert{
		{Alert: alerts.Alert{Labels: l, Annotations: map[string]string{"summary": "p99 > 2s <!channel>",
			"description": "errors & timeouts &amp; <https://evil.example|click>"}}, Status: notify.StatusFiring, Fingerprint: l.Fingerprint().String()},
		{Alert: alerts.Alert{Labels: alerts.Labels{"alertname": "<@U123>", "severity": "P1"}}, Status: notify.StatusResolved, Fingerprint: "x"},
	}
	m := notify.NewMessage(notify.KindNotify, "team", "k", alerts.Labels{"service": "a<b>&c"}, as, notifytest.Sample(notify.KindNotify).CreatedAt)
	got := Build(m, "#ops")
	want := Message{Channel: "#ops", Text: `[P1 FIRING] {service="a&lt;b&gt;&amp;c"} (2 alerts)`, Attachments: []Attachment{
		{Color: "warning", Title: "[firing] p99 &gt; 2s &lt;!channel&gt;",
			Text: "errors &amp; timeouts &amp;amp; &lt;https://evil.example|click&gt;"},
		{Color: "good", Title: "[resolved] &lt;@U123&gt;"},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Build:\n got %+v\nwant %+v", got, want)
	}
}
