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
	"unicode/utf8"

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

// A group of thousands of alerts with long annotations and long group
// labels stays within Slack's limits (text line and each title and text at
// most 3,000 characters, 40,000 in all, 100 attachments), and the last
// attachment counts the alerts left out.
func TestLargeGroupWithLongAnnotationsStaysWithinSlackLimits(t *testing.T) {
	var as []notify.Alert
	for i := range 3000 {
		l := alerts.Labels{"alertname": "BreakerOpen", "instance": fmt.Sprint(i), "severity": "P2"}
		as = append(as, notify.Alert{Alert: alerts.Alert{Labels: l, Annotations: map[string]string{
			"summary": strings.Repeat("s", 5000), "description": strings.Repeat("<&>", 5000)}},
			Status: notify.StatusFiring, Fingerprint: l.Fingerprint().String()})
	}
	m := notify.NewMessage(notify.KindNotify, "team", "k", alerts.Labels{"alertname": strings.Repeat("g", 50000)}, as,
		notifytest.Sample(notify.KindNotify).CreatedAt)
	out := Build(m, "")
	total := utf8.RuneCountInString(out.Text)
	if total > MaxFieldLen || !strings.HasSuffix(out.Text, "… (3000 alerts)") {
		t.Fatalf("text line of %d characters ends %q", total, out.Text[len(out.Text)-30:])
	}
	if len(out.Attachments) > MaxAttachments {
		t.Fatalf("%d attachments", len(out.Attachments))
	}
	for _, a := range out.Attachments {
		if utf8.RuneCountInString(a.Text) > MaxFieldLen || utf8.RuneCountInString(a.Title) > MaxFieldLen {
			t.Fatalf("attachment title of %d, text of %d characters", utf8.RuneCountInString(a.Title), utf8.RuneCountInString(a.Text))
		}
		if strings.Contains(a.Text, "&am…") || strings.Contains(a.Text, "&l…") || strings.Contains(a.Text, "&g…") {
			t.Fatal("an entity was cut")
		}
		total += utf8.RuneCountInString(a.Text) + utf8.RuneCountInString(a.Title)
	}
	if total > MaxMessageLen {
		t.Fatalf("message of %d characters, Slack cuts after %d", total, MaxMessageLen)
	}
	shown := len(out.Attachments) - 1
	if shown < 1 || out.Attachments[shown].Title != fmt.Sprintf("… and %d more alerts", 3000-shown) {
		t.Fatalf("%d alerts shown, last attachment %q", shown, out.Attachments[shown].Title)
	}
}

// A group that fits is shown whole, without a counting attachment.
func TestGroupWithinSlackLimitsIsShownWhole(t *testing.T) {
	var as []notify.Alert
	for i := range MaxAttachments {
		l := alerts.Labels{"alertname": "BreakerOpen", "instance": fmt.Sprint(i), "severity": "P2"}
		as = append(as, notify.Alert{Alert: alerts.Alert{Labels: l}, Status: notify.StatusFiring, Fingerprint: l.Fingerprint().String()})
	}
	m := notify.NewMessage(notify.KindNotify, "team", "k", nil, as, notifytest.Sample(notify.KindNotify).CreatedAt)
	out := Build(m, "")
	if len(out.Attachments) != MaxAttachments || strings.HasPrefix(out.Attachments[MaxAttachments-1].Title, "…") {
		t.Fatalf("%d attachments, last %q", len(out.Attachments), out.Attachments[len(out.Attachments)-1].Title)
	}
}
