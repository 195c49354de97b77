package webhook

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

// max_alerts bounds the body of a group of thousands of alerts, as in
// Alertmanager: the first alerts are posted and truncatedAlerts counts the
// rest; 0 posts them all.
func TestMaxAlertsBoundsTheBodyOfALargeGroup(t *testing.T) {
	var as []notify.Alert
	for i := range 5000 {
		l := alerts.Labels{"alertname": "BreakerOpen", "instance": fmt.Sprint(i), "severity": "P2"}
		as = append(as, notify.Alert{Alert: alerts.Alert{Labels: l, Annotations: map[string]string{"description": strings.Repeat("d", 200)}},
			Status: notify.StatusFiring, Fingerprint: l.Fingerprint().String()})
	}
	m := notify.NewMessage(notify.KindNotify, "team", "k", alerts.Labels{"alertname": "BreakerOpen"}, as, notifytest.Sample(notify.KindNotify).CreatedAt)
	bounded, _ := json.Marshal(Build(m, 100))
	whole, _ := json.Marshal(Build(m, 0))
	var p Payload
	if err := json.Unmarshal(bounded, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Alerts) != 100 || p.TruncatedAlerts != 4900 || len(bounded) > 64<<10 {
		t.Fatalf("%d alerts, %d truncated, %d bytes", len(p.Alerts), p.TruncatedAlerts, len(bounded))
	}
	if err := json.Unmarshal(whole, &p); err != nil || len(p.Alerts) != 5000 || p.TruncatedAlerts != 0 {
		t.Fatalf("max_alerts 0: %d alerts, %d truncated, %v", len(p.Alerts), p.TruncatedAlerts, err)
	}
}

// The payload is valid JSON that reads back as built, holds the first
// max_alerts alerts and counts the others in truncatedAlerts, whatever the
// labels, annotations and sizes.
func FuzzBuildTruncatesAndReadsBack(f *testing.F) {
	f.Add("checkout", "Shed \"on\" <checkout>\n", uint8(3), uint8(1))
	f.Add("\xff\x00", "\u2028", uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, value, summary string, count, maxAlerts uint8) {
		var as []notify.Alert
		for i := range int(count) {
			l := alerts.Labels{"alertname": "A", "v": value, "i": fmt.Sprint(i)}
			as = append(as, notify.Alert{Alert: alerts.Alert{Labels: l, Annotations: map[string]string{"summary": summary}},
				Status: notify.StatusFiring, Fingerprint: fmt.Sprint(i)})
		}
		m := notify.NewMessage(notify.KindNotify, "team", "k", alerts.Labels{"v": value}, as, notifytest.Sample(notify.KindNotify).CreatedAt)
		b, err := json.Marshal(Build(m, int(maxAlerts)))
		if err != nil {
			t.Fatal(err)
		}
		var p Payload
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatal(err)
		}
		want := int(count)
		if maxAlerts > 0 {
			want = min(want, int(maxAlerts))
		}
		if p.Version != "4" || len(p.Alerts) != want || p.TruncatedAlerts != int(count)-want || p.Alerts == nil {
			t.Fatalf("version %q, %d alerts, %d truncated, want %d of %d", p.Version, len(p.Alerts), p.TruncatedAlerts, want, count)
		}
		for i, a := range p.Alerts {
			if a.Fingerprint != fmt.Sprint(i) || a.Status != notify.StatusFiring || a.Labels["i"] != fmt.Sprint(i) {
				t.Fatalf("alert %d read back as %+v", i, a)
			}
		}
	})
}

// TestSendResolvedFalsePostsFiringAlertsOnly: a webhook with send_resolved
// false (applied by notify.FilterResolved, as the receivers are built)
// gets no resolve-only message and, of a group with both, the firing
// alerts; by default it gets the resolves.
func TestSendResolvedFalsePostsFiringAlertsOnly(t *testing.T) {
	got := make(chan Payload, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p Payload
		_ = json.NewDecoder(r.Body).Decode(&p)
		got <- p
	}))
	defer srv.Close()
	off := false
	hook, err := New(Config{URL: srv.URL, SendResolved: &off}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	n := notify.FilterResolved(hook, &off)
	if retry, err := n.Notify(context.Background(), notifytest.SampleResolved(notify.KindNotify)); retry || err != nil || len(got) != 0 {
		t.Fatalf("resolved-only message: retry %v, err %v, %d posted", retry, err, len(got))
	}
	if _, err := n.Notify(context.Background(), notifytest.Sample(notify.KindNotify)); err != nil {
		t.Fatal(err)
	}
	if p := <-got; len(p.Alerts) != 1 || p.Alerts[0].Status != notify.StatusFiring || p.Status != notify.StatusFiring {
		t.Fatalf("mixed message posted %+v", p)
	}
	hook, err = New(Config{URL: srv.URL}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := notify.FilterResolved(hook, nil).Notify(context.Background(), notifytest.SampleResolved(notify.KindNotify)); err != nil {
		t.Fatal(err)
	}
	if p := <-got; p.Status != notify.StatusResolved {
		t.Fatalf("default posted %+v", p)
	}
}
