package manager

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/alerts/dispatch"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/notify/alertmanager"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/alerts/store"
	"governor.dev/governor/internal/testenv"
	"governor.dev/governor/sdk/clock"
)

const alertmanagerBin = "/usr/bin/prometheus-alertmanager"

// startAlertmanager runs a real Alertmanager on a random loopback port with
// a temporary configuration and storage, clustering off, and returns its URL.
func startAlertmanager(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("GOVERNOR_TEST_ALERTMANAGER")
	if bin == "" {
		bin = alertmanagerBin
	}
	if _, err := os.Stat(bin); err != nil {
		testenv.Unavailable(t, "Alertmanager binary %s: %v (apt-get install prometheus-alertmanager)", bin, err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "alertmanager.yml")
	const conf = "route:\n  receiver: blackhole\n  group_wait: 1h\nreceivers:\n  - name: blackhole\n"
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	var out bytes.Buffer
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--cluster.listen-address=", "--log.level=warn")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("alertmanager output:\n%s", out.String())
		}
	})
	url := "http://" + addr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/-/ready", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("alertmanager exited: %v\n%s", err, out.String())
		case <-ctx.Done():
			t.Fatalf("alertmanager at %s not ready: %s", url, out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

type gettableAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	Fingerprint string            `json:"fingerprint"`
	StartsAt    time.Time         `json:"startsAt"`
	Status      struct {
		State string `json:"state"`
	} `json:"status"`
}

func listAlerts(t *testing.T, url string) []gettableAlert {
	t.Helper()
	resp, err := http.Get(url + "/api/v2/alerts")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var as []gettableAlert
	if err := json.NewDecoder(resp.Body).Decode(&as); err != nil {
		t.Fatal(err)
	}
	return as
}

func TestDeliversToRealAlertmanager(t *testing.T) {
	if testing.Short() {
		t.Skip("Alertmanager integration test")
	}
	amURL := startAlertmanager(t)
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "alerts.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	am, err := alertmanager.New(alertmanager.Config{URL: amURL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Recent fake time so that Alertmanager's own clock sees a current
	// alert: the firing alert is posted with an end 4 resend intervals
	// (4m) after it.
	start := time.Now().UTC().Truncate(time.Second).Add(-time.Minute)
	clk := clock.NewFake(start)
	db := &metricsDB{series: map[string][]rule.Sample{}}
	m, err := New(ctx, Options{Rules: testRules, Query: db.query, Store: st, Clock: clk, Registerer: prometheus.NewRegistry(),
		Receivers: map[string]notify.Notifier{"am": am}, Timing: dispatch.Timing{GroupWait: time.Second, GroupInterval: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	step := func(d time.Duration) {
		t.Helper()
		clk.Set(start.Add(d))
		if err := m.Step(ctx, clk.Now()); err != nil {
			t.Fatal(err)
		}
		if err := m.Idle(ctx); err != nil {
			t.Fatal(err)
		}
	}
	db.set("load", "checkout")
	step(0)
	step(time.Second)
	got := listAlerts(t, amURL)
	if len(got) != 1 {
		t.Fatalf("alertmanager holds %d alerts, want 1: %+v", len(got), got)
	}
	a := got[0]
	if a.Labels["alertname"] != "Load" || a.Labels["service"] != "checkout" || a.Labels["severity"] != "P1" ||
		a.Status.State != "active" || !a.StartsAt.Equal(start) {
		t.Fatalf("alert read back: %+v", a)
	}
	// Resolve: Alertmanager stops listing the alert as active.
	db.set("load")
	step(2 * time.Second)
	step(3 * time.Second)
	for _, a := range listAlerts(t, amURL) {
		if a.Labels["alertname"] == "Load" {
			t.Fatalf("resolved alert still listed: %+v", a)
		}
	}
}
