package pagerduty

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
