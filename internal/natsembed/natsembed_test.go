package natsembed

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestRestartKeepsStreamsAndURL(t *testing.T) {
	s, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	url := s.URL()
	if s.Port() == 0 || s.Port() == 4222 {
		t.Fatalf("port %d: want a random port", s.Port())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	put := func() {
		nc, err := nats.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b", Storage: jetstream.FileStorage})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(ctx, "k", []byte("v1")); err != nil {
			t.Fatal(err)
		}
	}
	put()

	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.URL() != url {
		t.Fatalf("URL after restart %q, want %q", s.URL(), url)
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(ctx, "b")
	if err != nil {
		t.Fatalf("bucket after restart: %v", err)
	}
	e, err := kv.Get(ctx, "k")
	if err != nil || string(e.Value()) != "v1" {
		t.Fatalf("value after restart: %v %v", e, err)
	}
}

func TestStopThenRestart(t *testing.T) {
	s, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	s.Stop()
	if s.Running() {
		t.Fatal("running after Stop")
	}
	if _, err := nats.Connect(s.URL(), nats.Timeout(time.Second)); err == nil {
		t.Fatal("connected to a stopped server")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
}

func TestCloseRemovesTemporaryStoreOnly(t *testing.T) {
	s, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := s.StoreDir()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary store %s still there: %v", dir, err)
	}

	kept := filepath.Join(t.TempDir(), "data")
	s, err = Start(Options{StoreDir: kept})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(kept); err != nil {
		t.Fatalf("configured store removed: %v", err)
	}
}

func TestBadOptions(t *testing.T) {
	tests := []struct {
		name string
		opts Options
	}{
		{"negative port", Options{Port: -5}},
		{"port too large", Options{Port: 70000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Start(tt.opts)
			if !errors.Is(err, ErrStart) {
				if s != nil {
					_ = s.Close()
				}
				t.Fatalf("err = %v, want ErrStart", err)
			}
		})
	}
}

// TestStartFailsAtOnceWithTheCause: the server cannot start (its port is
// taken, say by a process left from an earlier run; or its JetStream store is
// unusable). Start must fail at once with the server's reason, not wait out
// StartTimeout (a minute here) and then report only that it was not ready,
// and it must leave nothing running.
func TestStartFailsAtOnceWithTheCause(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	badStore := t.TempDir()
	if err := os.WriteFile(filepath.Join(badStore, "jetstream"), []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"port taken", Options{Port: taken.Addr().(*net.TCPAddr).Port}, "address already in use"},
		{"store unusable", Options{StoreDir: badStore}, "JetStream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			tt.opts.StartTimeout = time.Minute
			s, err := Start(tt.opts)
			if err == nil {
				_ = s.Close()
				t.Fatal("started")
			}
			if !errors.Is(err, ErrStart) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrStart saying %q", err, tt.want)
			}
		})
	}
}

// TestStoreDirInUseIsRefused: a second engine started on the same data
// directory (two `engine -dev` runs in one directory) must not open the
// JetStream store the first one writes: two servers on one store corrupt
// it. Start fails naming the directory; the first server keeps it across a
// Restart and gives it up at Close.
func TestStoreDirInUseIsRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	first, err := Start(Options{StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	second, err := Start(Options{StoreDir: dir})
	if err == nil {
		_ = second.Close()
		_ = first.Close()
		t.Fatal("a second server started on a store directory the first one uses")
	}
	if !errors.Is(err, ErrStart) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("err = %v, want ErrStart naming %s", err, dir)
	}
	if err := first.Restart(); err != nil {
		t.Fatalf("restart of the server holding the store: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := Start(Options{StoreDir: dir})
	if err != nil {
		t.Fatalf("store directory still held after Close: %v", err)
	}
	_ = again.Close()
}
