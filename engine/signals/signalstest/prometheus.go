package signalstest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/internal/testenv"
)

// PrometheusBinary is where the Debian package installs Prometheus;
// $GOVERNOR_TEST_PROMETHEUS overrides it.
func PrometheusBinary() string {
	if p := os.Getenv("GOVERNOR_TEST_PROMETHEUS"); p != "" {
		return p
	}
	return "/usr/bin/prometheus"
}

// StartPrometheus runs a real Prometheus scraping targets (host:port pairs
// serving /metrics) every interval, on a random loopback port with a fresh
// storage directory, and returns its base URL once it is ready. The server
// is killed when the test ends. A missing binary skips the test, or fails
// it under CI=true.
func StartPrometheus(t testing.TB, job string, interval time.Duration, targets ...string) string {
	t.Helper()
	bin := PrometheusBinary()
	if _, err := os.Stat(bin); err != nil {
		testenv.Unavailable(t, "prometheus binary %s: %v (apt-get install prometheus)", bin, err)
	}
	dir := t.TempDir()
	quoted := make([]string, len(targets))
	for i, tg := range targets {
		quoted[i] = fmt.Sprintf("%q", tg)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: %s
  scrape_timeout: %s
scrape_configs:
  - job_name: %q
    static_configs:
      - targets: [%s]
`, interval, interval, job, strings.Join(quoted, ", "))
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin,
		"--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("signalstest: start prometheus: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		_ = logf.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logf.Name()); err == nil {
				t.Logf("prometheus log:\n%s", b)
			}
		}
	})
	base := "http://" + addr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/-/ready", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("signalstest: prometheus exited before ready: %v", err)
		case <-ctx.Done():
			t.Fatalf("signalstest: prometheus not ready at %s within 30s", base)
		case <-time.After(50 * time.Millisecond): // readiness poll of an external process
		}
	}
}

// freePort returns a loopback address that was free a moment ago.
func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}
