package pagerduty

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/notify/notifytest"
)

// TestRedirectIsNotFollowed: a custom events URL that redirects is a failed
// delivery, never followed to the other host (which would receive the event
// with the routing key, and the URL's credentials as its Referer), with the
// default client and with one passed in.
func TestRedirectIsNotFollowed(t *testing.T) {
	for _, code := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		reached := make(chan string, 8)
		other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			reached <- r.Method + " " + r.Header.Get("Referer")
			w.WriteHeader(http.StatusAccepted)
		}))
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/v2/enqueue", code)
		}))
		for _, c := range []*http.Client{nil, srv.Client()} {
			n, err := New(Config{RoutingKey: "0123456789abcdef0123456789abcdef", URL: srv.URL + "/v2/enqueue"}, c)
			if err != nil {
				t.Fatal(err)
			}
			_, err = n.Notify(context.Background(), notifytest.Sample(notify.KindNotify))
			if len(reached) != 0 || err == nil {
				t.Fatalf("%d: %d requests reached the other host, err %v", code, len(reached), err)
			}
		}
		srv.Close()
		other.Close()
	}
}
