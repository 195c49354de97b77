package slack

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/notify/notifytest"
)

// A redirect is a refusal, not followed: a 302 would turn the POST into a
// GET that delivers nothing yet succeeds, a 307 or 308 would re-post the
// message to another host with the receiver's URL, token and all, as its
// Referer. With the default client and with one passed in.
func TestRedirectIsNotFollowed(t *testing.T) {
	for _, code := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		reached := make(chan string, 4)
		other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			reached <- r.Method + " " + r.Header.Get("Referer")
		}))
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/x", code)
		}))
		for _, c := range []*http.Client{nil, srv.Client()} {
			n, _ := New(Config{URL: srv.URL + "/services/SECRET"}, c)
			retry, err := n.Notify(context.Background(), notifytest.Sample(notify.KindNotify))
			if len(reached) != 0 || err == nil || retry {
				t.Fatalf("%d: %d requests reached the other host: retry %v err %v", code, len(reached), retry, err)
			}
		}
		srv.Close()
		other.Close()
	}
}
