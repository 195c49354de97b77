package transport_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"governor.dev/governor/sdk/breaker"
	"governor.dev/governor/sdk/outbound"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/sdk/transport"
)

func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	set, _ := outbound.New(outbound.Options{})
	_ = set.Apply([]rules.Downstream{{Name: "inventory", Breaker: &rules.Breaker{MinCalls: 2}}})
	rt, _ := transport.New(transport.Options{
		Set:        set,
		Downstream: func(r *http.Request) string { return map[string]string{host: "inventory"}[r.URL.Host] },
	})
	client := &http.Client{Transport: rt}
	for range 3 {
		resp, err := client.Get(srv.URL)
		if errors.Is(err, breaker.ErrOpen) {
			fmt.Println("refused without calling")
			continue
		}
		fmt.Println(resp.StatusCode)
		resp.Body.Close()
	}
	// Output:
	// 500
	// 500
	// refused without calling
}
