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
	"governor.dev/governor/sdk/clock"
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
	n, err := New(Config{URL: srv.URL + "/"}, srv.Client(), WithClock(clock.NewFake(notifytest.Sample(notify.KindNotify).CreatedAt)))
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
		t.Fatalf("firing alert ends at %s, want 4 resend intervals after the post, %s", p[0].EndsAt, want)
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
		if got := Build(m, n.ResendInterval(), m.CreatedAt)[0].EndsAt; !got.Equal(m.CreatedAt.Add(4 * tt.want)) {
			t.Errorf("resend_interval %q: firing alert ends at %s", tt.in, got)
		}
	}
}

// A firing alert whose message waited out an outage of Alertmanager is
// posted with an end ahead of the post, not of the message: an end that
// has passed would make Alertmanager take a new P0 as already resolved
// and page nobody.
func TestFiringAlertDeliveredLateIsPostedStillFiring(t *testing.T) {
	got := make(chan []PostableAlert, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p []PostableAlert
		_ = json.NewDecoder(r.Body).Decode(&p)
		got <- p
	}))
	defer srv.Close()
	m := notifytest.Sample(notify.KindNotify)
	clk := clock.NewFake(m.CreatedAt.Add(10 * time.Minute))
	n, err := New(Config{URL: srv.URL}, srv.Client(), WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Notify(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	p := <-got
	if want := clk.Now().Add(4 * DefaultResendInterval); !p[0].EndsAt.Equal(want) {
		t.Fatalf("firing alert posted with endsAt %s at %s: want %s", p[0].EndsAt, clk.Now(), want)
	}
}

// A resolved alert without an end is posted with one, else Alertmanager
// would keep it firing until its resolve_timeout.
func TestResolvedAlertWithoutEndIsPostedResolved(t *testing.T) {
	m := notifytest.Sample(notify.KindNotify)
	m.Alerts[1].EndsAt = time.Time{}
	now := m.CreatedAt.Add(time.Minute)
	p := Build(m, DefaultResendInterval, now)
	if p[1].EndsAt.IsZero() || p[1].EndsAt.After(now) {
		t.Fatalf("resolved alert posted with endsAt %s", p[1].EndsAt)
	}
}

// A redirect is a refusal: a 307 would re-post the alerts to another host.
func TestRedirectIsNotFollowed(t *testing.T) {
	reached := make(chan string, 4)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached <- r.Header.Get("Referer")
	}))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/x", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	n, _ := New(Config{URL: srv.URL}, nil)
	retry, err := n.Notify(context.Background(), notifytest.Sample(notify.KindNotify))
	if len(reached) != 0 || err == nil || retry {
		t.Fatalf("redirect followed (%d requests to the other host): retry %v err %v", len(reached), retry, err)
	}
}

// Whatever the times, a firing alert is posted ending after the post and
// a resolved one ending no later than the post (its own end, if it has
// one), so Alertmanager never takes a firing alert as resolved or keeps a
// resolved one firing.
func FuzzBuildEndsFiringAfterAndResolvedBeforeThePost(f *testing.F) {
	f.Add(int64(0), int64(60), int64(600), int64(60), false)
	f.Add(int64(-3600), int64(0), int64(-600), int64(1), true)
	f.Fuzz(func(t *testing.T, created, ends, now, resendSeconds int64, endless bool) {
		t0 := notifytest.Sample(notify.KindNotify).CreatedAt
		bound := func(s int64) time.Duration { return time.Duration(s%(1<<32)) * time.Second }
		m := notifytest.Sample(notify.KindNotify)
		m.CreatedAt = t0.Add(bound(created))
		m.Alerts[1].EndsAt = t0.Add(bound(ends))
		if endless {
			m.Alerts[1].EndsAt = time.Time{}
		}
		at := t0.Add(bound(now))
		resend := time.Duration(uint64(resendSeconds)%86400+1) * time.Second
		p := Build(m, resend, at)
		if len(p) != 2 || !p[0].EndsAt.After(at) || p[1].EndsAt.IsZero() {
			t.Fatalf("posted at %s: %+v", at, p)
		}
		if !endless && !p[1].EndsAt.Equal(m.Alerts[1].EndsAt) || endless && p[1].EndsAt.After(at) {
			t.Fatalf("resolved alert ends at %s, posted at %s", p[1].EndsAt, at)
		}
	})
}
