package grpcgov

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/url"
	"testing"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"governor.dev/governor/sdk/rules"
)

// TestRequestCarriesTheVerifiedPeerUnderTrustRules: with priority trust in
// the rules, a call over mTLS carries its client certificate's identity as
// Request.Peer; without trust rules none is worked out.
func TestRequestCarriesTheVerifiedPeerUnderTrustRules(t *testing.T) {
	u, _ := url.Parse("spiffe://prod/checkout")
	c := &x509.Certificate{URIs: []*url.URL{u}}
	ctx := peer.NewContext(context.Background(), &peer.Peer{
		Addr:     &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 5000},
		AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}, VerifiedChains: [][]*x509.Certificate{{c}}}},
	})
	g := newGovernor(t, &rules.Ruleset{Service: "svc", Routes: []rules.Route{{Name: "all", Match: rules.Match{PathPrefix: "/"}}}})
	if r, _ := request(ctx, g, "/pkg.S/M", false, false); r.Peer != "" || r.ClientIP != "10.0.0.1" {
		t.Fatalf("without trust rules: peer %q, client IP %q", r.Peer, r.ClientIP)
	}
	rs := g.Rules()
	rs.Priority = &rules.Priority{Trust: &rules.Trust{Max: rules.ClassCore, Peers: map[string]rules.Class{"spiffe://prod/checkout": rules.ClassCritical}}}
	if err := g.Apply(rs, 2); err != nil {
		t.Fatal(err)
	}
	if r, _ := request(ctx, g, "/pkg.S/M", false, false); r.Peer != "spiffe://prod/checkout" {
		t.Fatalf("under trust rules: peer %q", r.Peer)
	}
	if r, _ := request(context.Background(), g, "/pkg.S/M", false, false); r.Peer != "" {
		t.Fatalf("no peer in the context: peer %q", r.Peer)
	}
}
