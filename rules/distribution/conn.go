package distribution

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// ConnOptions are the NATS connection settings of the control plane (the
// SDK takes the same settings as nats.Option values through watch.Connect).
type ConnOptions struct {
	// URLs of the cluster's servers; default the embedded or local server
	// nats://127.0.0.1:4222.
	URLs []string
	// Name identifies the connection in server monitoring; default
	// "governor-control-plane".
	Name string
	// User and Password authenticate with a user/password pair.
	User, Password string
	// Token authenticates with a token.
	Token string
	// NKeySeedFile authenticates with an NKey seed file.
	NKeySeedFile string
	// CredsFile authenticates with a JWT credentials file (decentralised
	// auth); it excludes the other methods.
	CredsFile string
	// TLS: a CA bundle to verify the servers, a client certificate and key
	// for mutual TLS, and the server name to verify if it differs from the
	// URL's host.
	CAFile, CertFile, KeyFile, ServerName string
	// ReconnectWait between reconnect attempts; default 250ms. Reconnects
	// never stop.
	ReconnectWait time.Duration
	// Timeout of the initial connection; default 5s.
	Timeout time.Duration
}

// NATSOptions checks the settings and turns them into nats.Option values.
// It refuses contradictory or incomplete settings, naming the field.
func (c ConnOptions) NATSOptions() ([]nats.Option, error) {
	for _, u := range c.URLs {
		if !strings.Contains(u, "://") {
			return nil, fmt.Errorf("%w: URLs: %q needs a scheme (nats://, tls://)", ErrInvalid, u)
		}
	}
	methods := 0
	for _, set := range []bool{c.User != "" || c.Password != "", c.Token != "", c.NKeySeedFile != "", c.CredsFile != ""} {
		if set {
			methods++
		}
	}
	switch {
	case methods > 1:
		return nil, fmt.Errorf("%w: set one of User/Password, Token, NKeySeedFile or CredsFile", ErrInvalid)
	case (c.User == "") != (c.Password == ""):
		return nil, fmt.Errorf("%w: User and Password go together", ErrInvalid)
	case (c.CertFile == "") != (c.KeyFile == ""):
		return nil, fmt.Errorf("%w: CertFile and KeyFile go together", ErrInvalid)
	case c.ReconnectWait < 0 || c.Timeout < 0:
		return nil, fmt.Errorf("%w: ReconnectWait and Timeout must not be negative", ErrInvalid)
	}
	name := c.Name
	if name == "" {
		name = "governor-control-plane"
	}
	wait := c.ReconnectWait
	if wait == 0 {
		wait = 250 * time.Millisecond
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	opts := []nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(wait), nats.Timeout(timeout)}
	switch {
	case c.User != "":
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	case c.Token != "":
		opts = append(opts, nats.Token(c.Token))
	case c.NKeySeedFile != "":
		o, err := nats.NkeyOptionFromSeed(c.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("%w: NKeySeedFile: %w", ErrInvalid, err)
		}
		opts = append(opts, o)
	case c.CredsFile != "":
		if _, err := os.Stat(c.CredsFile); err != nil {
			return nil, fmt.Errorf("%w: CredsFile: %w", ErrInvalid, err)
		}
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	}
	if c.CAFile != "" || c.CertFile != "" || c.ServerName != "" {
		cfg, err := c.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.Secure(cfg))
	}
	return opts, nil
}

func (c ConnOptions) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: CAFile: %w", ErrInvalid, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: CAFile: %s holds no PEM certificate", ErrInvalid, c.CAFile)
		}
		cfg.RootCAs = pool
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: CertFile/KeyFile: %w", ErrInvalid, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// Connect dials NATS with the settings.
func (c ConnOptions) Connect() (*nats.Conn, error) {
	opts, err := c.NATSOptions()
	if err != nil {
		return nil, err
	}
	urls := strings.Join(c.URLs, ",")
	if urls == "" {
		urls = nats.DefaultURL
	}
	nc, err := nats.Connect(urls, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: connect %s: %w", ErrUnavailable, urls, err)
	}
	return nc, nil
}
