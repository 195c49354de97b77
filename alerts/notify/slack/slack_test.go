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

// Whatever the labels and annotations, and however many alerts, a message
// stays within Slack's limits, is valid JSON, cuts no entity and shows or
// counts every alert.
func FuzzBuildStaysWithinSlackLimits(f *testing.F) {
	f.Add("checkout", "p99 > 2s <!channel>", "errors & timeouts", uint16(3), uint16(1))
	f.Add(strings.Repeat("g", 3100), strings.Repeat("<", 1100), strings.Repeat("é&", 1600), uint16(200), uint16(7))
	f.Fuzz(func(t *testing.T, group, summary, description string, alertCount, repeat uint16) {
		n := int(alertCount%250) + 1
		summary = strings.Repeat(summary, int(repeat%8)+1)
		var as []notify.Alert
		for i := range n {
			l := alerts.Labels{"alertname": "A", "instance": fmt.Sprint(i), "severity": "P1"}
			as = append(as, notify.Alert{Alert: alerts.Alert{Labels: l, Annotations: map[string]string{"summary": summary, "description": description}},
				Status: notify.StatusFiring, Fingerprint: fmt.Sprint(i)})
		}
		m := notify.NewMessage(notify.KindNotify, "team", "k", alerts.Labels{"service": group}, as, notifytest.Sample(notify.KindNotify).CreatedAt)
		out := Build(m, "#ops")
		if _, err := json.Marshal(out); err != nil {
			t.Fatal(err)
		}
		total := utf8.RuneCountInString(out.Text)
		if total > MaxFieldLen || len(out.Attachments) > MaxAttachments || len(out.Attachments) == 0 {
			t.Fatalf("text of %d characters, %d attachments", total, len(out.Attachments))
		}
		for _, a := range out.Attachments {
			for _, s := range []string{a.Title, a.Text} {
				if utf8.RuneCountInString(s) > MaxFieldLen {
					t.Fatalf("field of %d characters", utf8.RuneCountInString(s))
				}
				if i := strings.LastIndexByte(s, '&'); i >= 0 && !strings.HasPrefix(s[i:], "&amp;") && !strings.HasPrefix(s[i:], "&lt;") && !strings.HasPrefix(s[i:], "&gt;") {
					t.Fatalf("entity cut: %q", s[i:])
				}
				total += utf8.RuneCountInString(s)
			}
		}
		if total > MaxMessageLen {
			t.Fatalf("message of %d characters", total)
		}
		last := out.Attachments[len(out.Attachments)-1]
		shown := len(out.Attachments)
		if strings.HasPrefix(last.Title, "… and ") {
			shown--
			if last.Title != fmt.Sprintf("… and %d more alerts", n-shown) {
				t.Fatalf("%d of %d shown, last %q", shown, n, last.Title)
			}
		} else if shown != n {
			t.Fatalf("%d of %d shown, no count of the others", shown, n)
		}
	})
}

// TestSendResolvedFalsePostsFiringAlertsOnly: a Slack receiver with
// send_resolved false (applied by notify.FilterResolved, as the receivers
// are built) posts no resolve-only message and, of a group with both, the
// firing alerts only.
func TestSendResolvedFalsePostsFiringAlertsOnly(t *testing.T) {
	got := make(chan Message, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m Message
		_ = json.NewDecoder(r.Body).Decode(&m)
		got <- m
	}))
	defer srv.Close()
	off := false
	s, err := New(Config{URL: srv.URL, SendResolved: &off}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	n := notify.FilterResolved(s, &off)
	if retry, err := n.Notify(context.Background(), notifytest.SampleResolved(notify.KindNotify)); retry || err != nil || len(got) != 0 {
		t.Fatalf("resolved-only message: retry %v, err %v, %d posted", retry, err, len(got))
	}
	if _, err := n.Notify(context.Background(), notifytest.Sample(notify.KindNotify)); err != nil {
		t.Fatal(err)
	}
	if m := <-got; len(m.Attachments) != 1 || m.Attachments[0].Color != "danger" || !strings.HasPrefix(m.Text, "[P0 FIRING]") {
		t.Fatalf("mixed message posted %+v", m)
	}
}
