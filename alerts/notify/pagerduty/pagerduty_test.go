package pagerduty

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/notify/notifytest"
)

func TestEventsV2(t *testing.T) {
	got := make(chan Event, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e Event
		if err := json.NewDecoder(r.Body).Decode(&e); err != nil {
			t.Error(err)
		}
		got <- e
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	n, err := New(Config{RoutingKey: "rk", URL: srv.URL}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	msg := notifytest.Sample(notify.KindNotify)
	if _, err := n.Notify(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	trig, res := <-got, <-got
	if trig.EventAction != "trigger" || trig.Payload.Severity != "critical" || trig.DedupKey != msg.Alerts[0].Fingerprint ||
		trig.RoutingKey != "rk" || trig.Payload.Summary != "Shed on checkout" {
		t.Fatalf("trigger %+v %+v", trig, trig.Payload)
	}
	if res.EventAction != "resolve" || res.DedupKey != msg.Alerts[1].Fingerprint || res.Payload != nil {
		t.Fatalf("resolve %+v", res)
	}
	if _, err := n.Notify(context.Background(), notifytest.Sample(notify.KindAcknowledge)); err != nil {
		t.Fatal(err)
	}
	if ack := <-got; ack.EventAction != "acknowledge" {
		t.Fatalf("ack %+v", ack)
	}
	<-got
}

func TestSeverityAndConfig(t *testing.T) {
	for s, want := range map[alerts.Severity]string{alerts.P0: "critical", alerts.P1: "error", alerts.P2: "warning"} {
		if SeverityOf(s) != want {
			t.Fatalf("%s -> %s", s, SeverityOf(s))
		}
	}
	if _, err := New(Config{}, nil); !errors.Is(err, alerts.ErrInvalid) {
		t.Fatal("missing routing key accepted")
	}
	if _, err := New(Config{RoutingKey: "k", URL: "gopher://x"}, nil); !errors.Is(err, alerts.ErrInvalid) {
		t.Fatal("bad url accepted")
	}
}

func TestLongSummaryIsTruncatedToPagerDutyLimit(t *testing.T) {
	n, err := New(Config{RoutingKey: "rk"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := notifytest.Sample(notify.KindNotify)
	m.Alerts[0].Annotations = map[string]string{"summary": strings.Repeat("é", 3000)}
	ev := n.Build(m)[0]
	if c := utf8.RuneCountInString(ev.Payload.Summary); c > 1024 {
		t.Fatalf("summary has %d characters, PagerDuty refuses more than 1024", c)
	}
}

// A retry sends only the events PagerDuty has not accepted yet: under its
// rate limit (3 events per window here), resending the accepted ones used
// up every window and the message never got through.
func TestRetrySendsOnlyEventsNotAcceptedYet(t *testing.T) {
	var mu sync.Mutex
	tokens := 3
	var got []Event
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e Event
		_ = json.NewDecoder(r.Body).Decode(&e)
		mu.Lock()
		defer mu.Unlock()
		if tokens == 0 {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		tokens--
		got = append(got, e)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	n, _ := New(Config{RoutingKey: "rk", URL: srv.URL}, srv.Client())
	var as []notify.Alert
	for _, s := range []string{"a", "b", "c", "d", "e"} {
		l := alerts.Labels{"alertname": "X", "service": s, "severity": "P0"}
		as = append(as, notify.Alert{Alert: alerts.Alert{Labels: l}, Status: notify.StatusFiring, Fingerprint: l.Fingerprint().String()})
	}
	m := notify.NewMessage(notify.KindNotify, "pd", "k", nil, as, notifytest.Sample(notify.KindNotify).CreatedAt)
	for attempt := 1; attempt <= 3; attempt++ {
		retry, err := n.Notify(context.Background(), m)
		if err == nil {
			break
		}
		if !retry {
			t.Fatal(err)
		}
		if attempt == 3 {
			t.Fatalf("no progress across attempts: %v", err)
		}
		mu.Lock()
		tokens = 3 // the next window
		mu.Unlock()
	}
	if len(got) != 5 {
		t.Fatalf("%d events accepted, want 5", len(got))
	}
}

// After a failed event, the later events of the same alert wait for the
// retry: PagerDuty gets the old episode's resolve before the new trigger.
func TestFailedEventHoldsLaterEventsOfTheSameAlert(t *testing.T) {
	var mu sync.Mutex
	fail := true
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e Event
		_ = json.NewDecoder(r.Body).Decode(&e)
		mu.Lock()
		defer mu.Unlock()
		if e.EventAction == "resolve" && fail {
			fail = false
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		got = append(got, e.EventAction)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	n, _ := New(Config{RoutingKey: "rk", URL: srv.URL}, srv.Client())
	l := alerts.Labels{"alertname": "X", "service": "a", "severity": "P0"}
	fp := l.Fingerprint().String()
	t0 := notifytest.Sample(notify.KindNotify).CreatedAt
	m := notify.NewMessage(notify.KindNotify, "pd", "k", nil, []notify.Alert{
		{Alert: alerts.Alert{Labels: l, StartsAt: t0, EndsAt: t0}, Status: notify.StatusResolved, Fingerprint: fp},
		{Alert: alerts.Alert{Labels: l, StartsAt: t0.Add(1)}, Status: notify.StatusFiring, Fingerprint: fp},
	}, t0)
	if retry, err := n.Notify(context.Background(), m); err == nil || !retry {
		t.Fatalf("retry %v err %v", retry, err)
	}
	if _, err := n.Notify(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "resolve,trigger" {
		t.Fatalf("PagerDuty got %v, want the resolve before the new trigger", got)
	}
}

// A 429 ends the attempt: the later events of the message would be refused
// too and use up PagerDuty's window again. The error carries PagerDuty's
// Retry-After for the queue, and the retry sends the events not accepted.
func TestRateLimitEndsTheAttempt(t *testing.T) {
	var mu sync.Mutex
	limited := true
	var requests int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		requests++
		if limited {
			w.Header().Set("Retry-After", "20")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	n, _ := New(Config{RoutingKey: "rk", URL: srv.URL}, srv.Client())
	var as []notify.Alert
	for _, s := range []string{"a", "b", "c"} {
		l := alerts.Labels{"alertname": "X", "service": s, "severity": "P0"}
		as = append(as, notify.Alert{Alert: alerts.Alert{Labels: l}, Status: notify.StatusFiring, Fingerprint: l.Fingerprint().String()})
	}
	m := notify.NewMessage(notify.KindNotify, "pd", "k", nil, as, notifytest.Sample(notify.KindNotify).CreatedAt)
	retry, err := n.Notify(context.Background(), m)
	var se *notify.StatusError
	if !retry || !errors.As(err, &se) || se.Wait(time.Time{}) != 20*time.Second {
		t.Fatalf("retry %v, err %v: want a retry with PagerDuty's Retry-After of 20s", retry, err)
	}
	mu.Lock()
	if requests != 1 {
		t.Fatalf("%d requests in the rate-limited attempt, want 1", requests)
	}
	limited, requests = false, 0
	mu.Unlock()
	if _, err := n.Notify(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if requests != 3 {
		t.Fatalf("%d events sent by the retry, want 3", requests)
	}
}
