package transport

import (
	"net/http"
	"net/url"

	"governor.dev/governor/sdk/balancer"
)

// balancerPick is an optional balancer pick.
type balancerPick struct {
	p  balancer.Pick
	ok bool
}

// readdressed is a shallow copy of a request sent to a picked endpoint,
// with its own URL.
type readdressed struct {
	r http.Request
	u url.URL
}
