package governor_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// trusted returns a ruleset whose one route "/" caps unlisted peers at core
// and lets the checkout peer claim critical.
func trusted() *rules.Ruleset {
	rs := ruleset(route("all", "/"))
	rs.Priority = &rules.Priority{Trust: &rules.Trust{
		Max:   rules.ClassCore,
		Peers: map[string]rules.Class{"spiffe://prod/checkout": rules.ClassCritical, "reports": rules.ClassBatch},
	}}
	return rs
}

func TestPriorityTrustCapsTheClassAPeerMayClaim(t *testing.T) {
	f := newFixture(t, 1, trusted())
	cases := []struct {
		name, prio, peer string
		want             rules.Class
	}{
		{"untrusted claim of critical is core", "critical", "", rules.ClassCore},
		{"untrusted digit 0 is core", "0", "spiffe://prod/other", rules.ClassCore},
		{"trusted peer keeps critical", "critical", "spiffe://prod/checkout", rules.ClassCritical},
		{"lower claims are kept", "browse", "", rules.ClassBrowse},
		{"a peer capped below the max gets its own cap", "critical", "reports", rules.ClassBatch},
		{"a peer is matched exactly", "critical", "SPIFFE://prod/checkout", rules.ClassCore},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := f.g.Admit(context.Background(), governor.Request{Path: "/x", Priority: c.prio, Peer: c.peer})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Release(0, governor.Success)
			if got := p.Class(); got != c.want {
				t.Fatalf("class %q, want %q", got, c.want)
			}
		})
	}
}

func TestPriorityTrustCapsTheDefaultClass(t *testing.T) {
	rs := trusted()
	rs.Priority.Default = rules.ClassCritical
	rs.Priority.Trust.Max = rules.ClassBrowse
	f := newFixture(t, 1, rs)
	p, err := f.g.Admit(context.Background(), governor.Request{Path: "/x"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(0, governor.Success)
	if got := p.Class(); got != rules.ClassBrowse {
		t.Fatalf("class %q, want browse: the default class is claimed too", got)
	}
}

func TestWithoutTrustAnyPeerClaimsAnyClass(t *testing.T) {
	f := newFixture(t, 1, ruleset(route("all", "/")))
	if f.g.TrustsPeers() {
		t.Fatal("TrustsPeers with no trust rules")
	}
	p, err := f.g.Admit(context.Background(), governor.Request{Path: "/x", Priority: "critical"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(0, governor.Success)
	if got := p.Class(); got != rules.ClassCritical {
		t.Fatalf("class %q, want critical", got)
	}
	if err := f.g.Apply(trusted(), 2); err != nil {
		t.Fatal(err)
	}
	if !f.g.TrustsPeers() {
		t.Fatal("TrustsPeers false after trust rules applied")
	}
}

func cert(uri, dns, cn string) *x509.Certificate {
	c := &x509.Certificate{Subject: pkix.Name{CommonName: cn}}
	if uri != "" {
		u, _ := url.Parse(uri)
		c.URIs = []*url.URL{u}
	}
	if dns != "" {
		c.DNSNames = []string{dns}
	}
	return c
}

func TestPeerIdentity(t *testing.T) {
	verified := func(c *x509.Certificate) *tls.ConnectionState {
		return &tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}, VerifiedChains: [][]*x509.Certificate{{c}}}
	}
	cases := []struct {
		name string
		cs   *tls.ConnectionState
		want string
	}{
		{"no TLS", nil, ""},
		{"no client certificate", &tls.ConnectionState{}, ""},
		{"unverified certificate proves nothing", &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert("spiffe://prod/checkout", "", "")}}, ""},
		{"URI SAN first", verified(cert("spiffe://prod/checkout", "checkout.prod", "checkout")), "spiffe://prod/checkout"},
		{"then DNS SAN", verified(cert("", "checkout.prod", "checkout")), "checkout.prod"},
		{"then common name", verified(cert("", "", "checkout")), "checkout"},
	}
	for _, c := range cases {
		if got := governor.PeerIdentity(c.cs); got != c.want {
			t.Errorf("%s: PeerIdentity = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestPriorityTrustCountsCappedRequests(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := governor.DefaultOptions("svc")
	opts.Clock = clock.NewFake(fakeStart)
	opts.Registerer = reg
	g, err := governor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	if err := g.Apply(ruleset(route("all", "/")), 1); err != nil {
		t.Fatal(err)
	}
	if m := gather(t, reg); m["governor_sdk_priority_capped_total"] != nil {
		t.Fatal("capped series exported without trust rules")
	}
	if err := g.Apply(trusted(), 2); err != nil {
		t.Fatal(err)
	}
	admit := func(prio, peer string) {
		p, err := g.Admit(context.Background(), governor.Request{Path: "/x", Priority: prio, Peer: peer})
		if err != nil {
			t.Fatal(err)
		}
		p.Release(time.Millisecond, governor.Success)
	}
	for range 3 {
		admit("critical", "")
	}
	admit("critical", "spiffe://prod/checkout")
	admit("core", "")
	m := gather(t, reg)
	for class, want := range map[string]float64{"critical": 0, "core": 3, "browse": 0, "batch": 0} {
		if got := m.value("governor_sdk_priority_capped_total", map[string]string{"route": "all", "class": class}); got != want {
			t.Errorf("capped %s = %v, want %v", class, got, want)
		}
	}
	if got := m.value("governor_sdk_requests_total", map[string]string{"route": "all", "class": "core", "outcome": "admitted"}); got != 4 {
		t.Errorf("admitted core = %v, want 4: each capped request is counted once, under the class it was given", got)
	}
}
