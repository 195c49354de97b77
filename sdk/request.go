package governor

import (
	"net/http"
	"time"
)

// Header looks up request headers (or gRPC metadata) by name. Names are
// given in canonical MIME form ("X-Traffic-Priority"); http.Header satisfies
// it, other transports adapt their own case rules.
type Header interface {
	Get(name string) string
}

// Request describes an inbound request to Admit. Fields left empty are read
// through Header (when set) under the header names the rules configure; a
// field that is set wins over the header.
type Request struct {
	// Path selects the route (longest path prefix); required.
	Path string
	// Method narrows the route (routes listing methods win over others).
	Method string
	// Priority is the raw priority value: a digit 0-9 or a class name or
	// alias. Empty: read from the priority header; missing: the default class.
	Priority string
	// User keys consistent shedding. Empty: read from the user header.
	User string
	// Caller names the calling service for caller exemptions and for the
	// per-key rate limits keyed on the route's caller header
	// (rules.Exempt.CallerHeader, default X-Caller). Empty: read from that
	// header.
	Caller string
	// Peer is the caller's identity as its transport authenticated it
	// (PeerIdentity of its mTLS certificate; sdk/httpgov and sdk/grpc set
	// it), never taken from a header. The rules' priority trust
	// (rules.Trust) caps the class a peer may claim; empty is an unknown
	// peer.
	Peer string
	// ClientIP keys the "ip" per-key rate limits.
	ClientIP string
	// Deadline is when the caller stops waiting for the answer (zero: not
	// stated). Admit refuses with ErrDeadline a request whose deadline has
	// passed or, except for the critical class, leaves less time than the
	// route's recent average latency (times rules.Concurrency.DeadlineFactor,
	// default 1) while the route has requests in flight, before any other
	// stage. It is compared with the Governor's clock (Clock.Now).
	Deadline time.Time
	// Header resolves fields left empty and "header:<Name>" rate-limit keys.
	Header Header
}

// header looks name (canonical, as every name the rules configure is) up.
// An http.Header, which sdk/httpgov passes, is read directly: its Get would
// canonicalize the already canonical name again on every request.
func (r *Request) header(name string) string {
	if r.Header == nil || name == "" {
		return ""
	}
	if h, ok := r.Header.(http.Header); ok {
		if v := h[name]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	return r.Header.Get(name)
}
