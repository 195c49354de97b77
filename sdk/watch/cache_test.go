package watch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
)

func TestCacheRoundTripAndAtomicity(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "rules.json")
	if env, err := LoadCache(path, "checkout"); env != nil || err != nil {
		t.Fatalf("missing cache: %v %v, want nil nil", env, err)
	}
	if err := SaveCache(path, envelopeBytes(t, "checkout", 4)); err != nil {
		t.Fatal(err)
	}
	if err := SaveCache(path, envelopeBytes(t, "checkout", 5)); err != nil {
		t.Fatal(err)
	}
	env, err := LoadCache(path, "checkout")
	if err != nil || env.Version != 5 {
		t.Fatalf("LoadCache = %v, %v; want version 5", env, err)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*tmp*"))
	if len(left) != 0 {
		t.Fatalf("temporary files left behind: %v", left)
	}
}

func TestCacheRefusesCorruptOrForeignFiles(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		data []byte
	}{
		{"corrupt", []byte(`{"service":"checkout","vers`)},
		{"other service", envelopeBytes(t, "payments", 3)},
		{"bad checksum", []byte(`{"service":"checkout","version":3,"checksum":"sha256:00","ruleset":{"service":"checkout"}}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.name)
			if err := os.WriteFile(path, tt.data, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := LoadCache(path, "checkout"); !errors.Is(err, ErrCache) {
				t.Fatalf("err = %v, want ErrCache", err)
			}
		})
	}
}

// newOffline returns a watcher on a connection that never reached a server.
func newOffline(t *testing.T, opts Options) *Watcher {
	t.Helper()
	nc, err := nats.Connect("nats://127.0.0.1:1", nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	opts.Conn = nc
	w, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestNewStartsOnTheCachedVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.json")
	if err := SaveCache(path, envelopeBytes(t, "checkout", 12)); err != nil {
		t.Fatal(err)
	}
	app := &fakeApplier{}
	w := newOffline(t, Options{Service: "checkout", Applier: app, CacheFile: path})
	if w.Running() != 12 || len(app.versions()) != 1 {
		t.Fatalf("running %d applied %v, want the cached version 12", w.Running(), app.versions())
	}
}

func TestNewSurvivesACorruptCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.json")
	if err := os.WriteFile(path, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	var got []error
	reg := prometheus.NewRegistry()
	w := newOffline(t, Options{Service: "checkout", Applier: &fakeApplier{}, CacheFile: path,
		Registerer: reg, OnError: func(err error) { got = append(got, err) }})
	if w.Running() != 0 || len(got) != 1 || !errors.Is(got[0], ErrCache) {
		t.Fatalf("running %d errors %v", w.Running(), got)
	}
	if c := counter(t, reg, "governor_sdk_watch_cache_errors_total", "op", "load"); c != 1 {
		t.Fatalf("cache load errors = %v, want 1", c)
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	nc, _ := nats.Connect("nats://127.0.0.1:1", nats.RetryOnFailedConnect(true))
	t.Cleanup(nc.Close)
	tests := []struct {
		name string
		opts Options
	}{
		{"no service", Options{Conn: nc, Applier: &fakeApplier{}}},
		{"no conn", Options{Service: "s", Applier: &fakeApplier{}}},
		{"no applier", Options{Service: "s", Conn: nc}},
		{"negative heartbeat", Options{Service: "s", Conn: nc, Applier: &fakeApplier{}, Heartbeat: -1}},
		// What DecodeReport and DecodeHeartbeat would refuse in every
		// report and heartbeat.
		{"instance over 256 bytes", Options{Service: "s", Instance: strings.Repeat("i", 257), Conn: nc, Applier: &fakeApplier{}}},
		{"service over 256 bytes", Options{Service: strings.Repeat("s", 257), Conn: nc, Applier: &fakeApplier{}}},
		{"labels over 16 KiB", Options{Service: "s", Labels: map[string]string{"x": strings.Repeat("v", 16<<10)}, Conn: nc, Applier: &fakeApplier{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.opts); !errors.Is(err, ErrInvalidOption) {
				t.Fatalf("err = %v, want ErrInvalidOption", err)
			}
		})
	}
}

func TestRunEndsWhenTheConnectionIsClosed(t *testing.T) {
	w := newOffline(t, Options{Service: "checkout", Applier: &fakeApplier{}})
	w.nc.Close()
	if err := w.Run(context.Background()); !errors.Is(err, nats.ErrConnectionClosed) {
		t.Fatalf("Run = %v, want ErrConnectionClosed", err)
	}
}

// TestNewThatCannotRegisterItsMetricsNamesThemAndLeavesNone: a series that
// is taken on the Registerer fails New with its name, and the series
// registered before it are taken back. They stayed registered, so the
// service could not build a watcher on that Registerer again.
func TestNewThatCannotRegisterItsMetricsNamesThemAndLeavesNone(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "governor_sdk_watch_running_version", Help: "other",
		ConstLabels: prometheus.Labels{"service": "checkout"}}))
	nc, _ := nats.Connect("nats://127.0.0.1:1", nats.RetryOnFailedConnect(true))
	t.Cleanup(nc.Close)
	_, err := New(Options{Service: "checkout", Conn: nc, Applier: &fakeApplier{}, Registerer: reg})
	if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "governor_sdk_watch_running_version") {
		t.Fatalf("New: %v; want ErrInvalidOption naming governor_sdk_watch_running_version", err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "governor_sdk_watch_running_version" {
			t.Errorf("%s left registered by the failed New", mf.GetName())
		}
	}
}
