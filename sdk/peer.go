package governor

import (
	"crypto/tls"
	"crypto/x509"
)

// PeerIdentity names the caller a TLS connection authenticated, for
// Request.Peer and the peers of rules.Trust: the first URI SAN of its
// verified client certificate (a SPIFFE ID such as
// spiffe://prod/ns/shop/sa/checkout), else its first DNS SAN, else its
// subject's common name. It returns "" for a nil state, a connection without
// a client certificate, or one whose certificate was not verified (a server
// that requests but does not verify client certificates proves nothing about
// the caller).
func PeerIdentity(cs *tls.ConnectionState) string {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return ""
	}
	return certIdentity(cs.PeerCertificates[0])
}

func certIdentity(c *x509.Certificate) string {
	if len(c.URIs) > 0 && c.URIs[0] != nil {
		return c.URIs[0].String()
	}
	if len(c.DNSNames) > 0 {
		return c.DNSNames[0]
	}
	return c.Subject.CommonName
}

// TrustsPeers reports whether the rules in force cap priorities by peer
// (rules.Priority.Trust), so that a transport need only work out
// Request.Peer, which costs an allocation for a URI SAN, when it does.
func (g *Governor) TrustsPeers() bool { return g.state.Load().classifier.Trusts() }
