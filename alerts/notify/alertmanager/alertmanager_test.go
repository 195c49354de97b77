package alertmanager

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

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
	m := notifytest.Sample(notify.KindNotify)
	if len(p) != 2 || p[0].Labels["severity"] != "P0" || !p[1].EndsAt.Equal(m.Alerts[1].EndsAt) {
		t.Fatalf("body %+v", p)
	}
	if want := m.CreatedAt.Add(4 * DefaultResendInterval); !p[0].EndsAt.Equal(want) {
		t.Fatalf("firing alert ends at %s, want 4 resend intervals after the message, %s", p[0].EndsAt, want)
	}
	if _, err := New(Config{URL: "tcp://am:9093"}, nil); !errors.Is(err, alerts.ErrInvalid) {
		t.Fatalf("bad scheme accepted: %v", err)
	}
}

// The resend interval is configurable, defaults to a minute, and sets the
// end of the firing alerts posted; it must be a positive duration.
func TestResendInterval(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", time.Minute, true},
		{"30s", 30 * time.Second, true},
		{"0s", 0, false},
		{"-1m", 0, false},
		{"soon", 0, false},
	}
	for _, tt := range tests {
		n, err := New(Config{URL: "http://am:9093", ResendInterval: tt.in}, nil)
		if !tt.ok {
			if !errors.Is(err, alerts.ErrInvalid) {
				t.Errorf("resend_interval %q accepted: %v", tt.in, err)
			}
			continue
		}
		if err != nil || n.ResendInterval() != tt.want {
			t.Errorf("resend_interval %q: %v, %v, want %s", tt.in, n, err, tt.want)
			continue
		}
		m := notifytest.Sample(notify.KindResend)
		if got := Build(m, n.ResendInterval())[0].EndsAt; !got.Equal(m.CreatedAt.Add(4 * tt.want)) {
			t.Errorf("resend_interval %q: firing alert ends at %s", tt.in, got)
		}
	}
}
