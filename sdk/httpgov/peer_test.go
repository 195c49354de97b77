package httpgov_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/httpgov"
	"governor.dev/governor/sdk/rules"
)

// issue returns a certificate for template signed by parent (self-signed
// when parent is nil) and its key.
func issue(t *testing.T, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, key
}

// classCounts reads governor_sdk_requests_total's admitted requests by class.
func classCounts(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "governor_sdk_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var class, outcome string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "class":
					class = l.GetValue()
				case "outcome":
					outcome = l.GetValue()
				}
			}
			if outcome == "admitted" {
				out[class] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// TestPriorityTrustUsesTheVerifiedClientCertificate: over mTLS, a client
// whose certificate names a trusted peer keeps the critical class it
// claims; another client, with a valid certificate for another identity,
// claiming critical is admitted as core.
func TestPriorityTrustUsesTheVerifiedClientCertificate(t *testing.T) {
	now := time.Now()
	ca, caKey := issue(t, &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}, nil, nil)
	client := func(serial int64, id string) tls.Certificate {
		u, _ := url.Parse(id)
		c, k := issue(t, &x509.Certificate{SerialNumber: big.NewInt(serial), URIs: []*url.URL{u},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, ca, caKey)
		return tls.Certificate{Certificate: [][]byte{c.Raw}, PrivateKey: k, Leaf: c}
	}
	reg := prometheus.NewRegistry()
	g := newGovernor(t, clock.NewFake(now), reg, rules.Route{Name: "all", Match: rules.Match{PathPrefix: "/"}})
	rs := g.Rules()
	rs.Priority = &rules.Priority{Trust: &rules.Trust{Max: rules.ClassCore,
		Peers: map[string]rules.Class{"spiffe://prod/checkout": rules.ClassCritical}}}
	if err := g.Apply(rs, 2); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(httpgov.Middleware(g, httpgov.Options{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	srv.TLS = &tls.Config{ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	srv.StartTLS()
	defer srv.Close()
	for _, id := range []string{"spiffe://prod/checkout", "spiffe://prod/scraper"} {
		tr := srv.Client().Transport.(*http.Transport).Clone()
		tr.TLSClientConfig.Certificates = []tls.Certificate{client(2, id)}
		req, _ := http.NewRequest("GET", srv.URL+"/x", nil)
		req.Header.Set(rules.DefaultPriorityHeader, "critical")
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		tr.CloseIdleConnections()
	}
	if got := classCounts(t, reg); got["critical"] != 1 || got["core"] != 1 {
		t.Fatalf("admitted by class %v, want the trusted peer critical and the other core", got)
	}
}

func TestPeerOptionIsAskedOnlyUnderTrustRules(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := newGovernor(t, clock.NewFake(time.Now()), reg, rules.Route{Name: "all", Match: rules.Match{PathPrefix: "/"}})
	calls := 0
	h := httpgov.Middleware(g, httpgov.Options{Peer: func(*http.Request) string { calls++; return "gateway" }})(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/x", nil))
	if calls != 0 {
		t.Fatalf("Peer called %d times without trust rules", calls)
	}
	rs := g.Rules()
	rs.Priority = &rules.Priority{Trust: &rules.Trust{Max: rules.ClassBatch, Peers: map[string]rules.Class{"gateway": rules.ClassCritical}}}
	if err := g.Apply(rs, 2); err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("GET", "/x", nil)
	req.Header.Set(rules.DefaultPriorityHeader, "0")
	h.ServeHTTP(httptest.NewRecorder(), req)
	if calls != 1 {
		t.Fatalf("Peer called %d times under trust rules, want 1", calls)
	}
	if got := classCounts(t, reg); got["critical"] != 1 {
		t.Fatalf("admitted by class %v, want the gateway's request critical", got)
	}
}
