package distribution

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

func TestConnOptionsRefuseBadSettings(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		c    ConnOptions
	}{
		{"URL without scheme", ConnOptions{URLs: []string{"127.0.0.1:4222"}}},
		{"two auth methods", ConnOptions{User: "u", Password: "p", Token: "t"}},
		{"user without password", ConnOptions{User: "u"}},
		{"cert without key", ConnOptions{CertFile: "c.pem"}},
		{"missing creds file", ConnOptions{CredsFile: filepath.Join(dir, "none.creds")}},
		{"missing nkey seed", ConnOptions{NKeySeedFile: filepath.Join(dir, "none.nk")}},
		{"CA file without PEM", ConnOptions{CAFile: notPEM}},
		{"negative timeout", ConnOptions{Timeout: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.c.NATSOptions(); !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestConnOptionsUserPasswordAgainstAServer(t *testing.T) {
	opts := &server.Options{Host: "127.0.0.1", Port: -1, Username: "gov", Password: "s3cret", NoLog: true, NoSigs: true}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(5e9) {
		t.Fatal("server not ready")
	}
	t.Cleanup(srv.Shutdown)
	url := srv.ClientURL()

	nc, err := ConnOptions{URLs: []string{url}, User: "gov", Password: "s3cret"}.Connect()
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	if _, err := (ConnOptions{URLs: []string{url}, User: "gov", Password: "wrong"}).Connect(); !errors.Is(err, ErrUnavailable) || !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("wrong password: %v", err)
	}
}
