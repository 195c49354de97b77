package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestDispatch(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"no command", nil, 2, "usage: engine <command>"},
		{"help", []string{"help"}, 0, "detect"},
		{"help names the precedence", []string{"-h"}, 0, "GOVERNOR_* environment variables, then flags"},
		{"unknown", []string{"serve"}, 2, `unknown command "serve"`},
		{"check config", []string{"-check-config", "-listen", "127.0.0.1:0"}, 0, ""},
		{"backtest without flags", []string{"backtest"}, 2, "-service is required"},
		{"backtest bad time", []string{"backtest", "-service", "a", "-from", "yesterday", "-prometheus", "http://x", "-rules", "r.json"}, 2, "-from"},
		{"config errors named", []string{"-check-config", "-listen", "nope", "-interval", "1ms"}, 2, "interval"},
		{"detect without flags", []string{"detect"}, 2, "-data and -out are required"},
		{"detect bad flag", []string{"detect", "-bogus"}, 2, "flag provided but not defined"},
		{"detect missing dir", []string{"detect", "-data", "/nonexistent", "-out", "/tmp/x"}, 1, "data dir"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := dispatch(context.Background(), tt.args, &stdout, &stderr)
			if code != tt.wantCode || !strings.Contains(stderr.String(), tt.wantErr) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr.String(), tt.wantCode, tt.wantErr)
			}
		})
	}
}

// TestDetectRefusesOutputIntoTheDataDirectory: -out naming the -data
// directory (by any path) would truncate every input file as it is read.
func TestDetectRefusesOutputIntoTheDataDirectory(t *testing.T) {
	data := t.TempDir()
	p := filepath.Join(data, "cat", "a.csv")
	body := "timestamp,value\n2014-04-01 00:00:00,1\n2014-04-01 00:05:00,2\n"
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := dispatch(context.Background(), []string{"detect", "-data", data, "-out", data + "/."}, &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "is the -data directory") {
		t.Errorf("exit %d, stderr %q; want 2 naming -data", code, stderr.String())
	}
	if got, err := os.ReadFile(p); err != nil || string(got) != body {
		t.Errorf("input now %q (%v), want it untouched", got, err)
	}
}

// TestDetectEndToEnd runs `engine detect` on a small corpus in the NAB
// layout and checks every input file got an output with a score per row.
func TestDetectEndToEnd(t *testing.T) {
	data, out := t.TempDir(), t.TempDir()
	t0 := time.Date(2014, 4, 1, 0, 0, 0, 0, time.UTC)
	files := map[string]int{"catA/one.csv": 500, "catA/two.csv": 20, "catB/three.csv": 400}
	for name, n := range files {
		var b strings.Builder
		b.WriteString("timestamp,value\n")
		for i := range n {
			v := float64(i % 7)
			if i == 450 {
				v = 100
			}
			b.WriteString(t0.Add(time.Duration(i)*5*time.Minute).Format("2006-01-02 15:04:05") + "," + strconv.FormatFloat(v, 'g', -1, 64) + "\n")
		}
		p := filepath.Join(data, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := dispatch(context.Background(), []string{"detect", "-data", data, "-out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for name, n := range files {
		b, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if lines[0] != "timestamp,value,anomaly_score" || len(lines) != n+1 {
			t.Fatalf("%s: header %q and %d rows, want the NAB header and %d rows", name, lines[0], len(lines)-1, n)
		}
	}
	if !strings.Contains(stderr.String(), "rows=920") {
		t.Errorf("log %q does not report 920 rows", stderr.String())
	}
}

// TestAlertsConfig: the alerting document, named by GOVERNOR_ALERTS_CONFIG,
// -alerts-config or alerts.config_file in the engine's file, is checked with
// the rest of the configuration, its errors named together with the
// engine's.
func TestAlertsConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ok := write("ok.json", `{"receivers": [{"name": "hook", "webhook": {"url": "http://127.0.0.1:9/hook"}}], "routes": [{"receiver": "hook"}]}`)
	ftp := write("ftp.json", `{"receivers": [{"name": "hook", "webhook": {"url": "ftp://example.com/"}}]}`)
	engineFile := func(alerts string) string {
		return write("engine-"+filepath.Base(alerts)+".yaml", "alerts:\n  config_file: "+alerts+"\n")
	}
	tests := []struct {
		name     string
		env      string
		args     []string
		wantCode int
		want     []string
	}{
		{"env valid", ok, nil, 0, []string{"alerting OK", "1 receivers, 1 routes"}},
		{"env not http", ftp, nil, 2, []string{"alerts.config_file", "receivers[0]"}},
		{"env unknown field", write("typo.json", `{"recievers": []}`), nil, 2, []string{"recievers"}},
		{"env missing", filepath.Join(dir, "absent.json"), nil, 2, []string{"alerts.config_file", "absent.json"}},
		{"flag", "", []string{"-alerts-config", ftp}, 2, []string{"receivers[0]"}},
		{"flag over env", ftp, []string{"-alerts-config", ok}, 0, []string{"alerting OK"}},
		{"config file key", "", []string{"-config", engineFile(ok)}, 0, []string{"alerting OK", "config_file: " + ok}},
		{"config file key, bad document", "", []string{"-config", engineFile(ftp)}, 2, []string{"receivers[0]"}},
		{"both documents' errors at once", ftp, []string{"-interval", "1ms"}, 2, []string{"interval:", "receivers[0]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("GOVERNOR_ALERTS_CONFIG", tt.env)
			var stdout, stderr bytes.Buffer
			args := append([]string{"-check-config", "-listen", "127.0.0.1:0"}, tt.args...)
			code := dispatch(context.Background(), args, &stdout, &stderr)
			out := stdout.String() + stderr.String()
			if code != tt.wantCode {
				t.Fatalf("exit %d, output %q; want %d", code, out, tt.wantCode)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output %q does not contain %q", out, w)
				}
			}
		})
	}
}

// TestConfigPrecedence: what `engine -h` says holds: the file is overridden
// by GOVERNOR_* variables, which flags override.
func TestConfigPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "engine.yaml")
	if err := os.WriteFile(file, []byte("listen: 127.0.0.1:1111\ninterval: 7s\nidentity: from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOVERNOR_LISTEN", "127.0.0.1:2222")
	t.Setenv("GOVERNOR_INTERVAL", "9s")
	var stdout, stderr bytes.Buffer
	code := dispatch(context.Background(), []string{"-check-config", "-config", file, "-listen", "127.0.0.1:3333"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"listen: 127.0.0.1:3333", "interval: 9s", "identity: from-file"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("configuration lacks %q:\n%s", want, stdout.String())
		}
	}
}

// TestCheckConfigMasksPasswords: -check-config prints the configuration
// without the credentials its URLs may carry.
func TestCheckConfigMasksPasswords(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := dispatch(context.Background(), []string{"-check-config", "-listen", "127.0.0.1:0",
		"-database", "postgres://gov:s3cret-db@db.internal:5432/gov", "-nats", "nats://svc:s3cret-nats@nats:4222",
		"-prometheus", "https://scrape:s3cret-prom@prom.internal"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if strings.Contains(stdout.String(), "s3cret") {
		t.Errorf("passwords printed:\n%s", stdout.String())
	}
	for _, want := range []string{"postgres://gov:xxxxx@db.internal:5432/gov", "nats://svc:xxxxx@nats:4222", "https://scrape:xxxxx@prom.internal"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("configuration lacks %q:\n%s", want, stdout.String())
		}
	}
}

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"postgres://gov@db/gov", "postgres://gov@db/gov"},
		{"postgres://db/gov?password=p1&sslmode=require", "postgres://db/gov?password=xxxxx&sslmode=require"},
		{"host=db user=gov password=p1 dbname=gov", "host=db user=gov password=xxxxx dbname=gov"},
		{"host=db password='p 1'", "host=db password=xxxxx"},
		{"nats://a:p1@h1:4222,nats://a:p2@h2:4222", "nats://a:xxxxx@h1:4222,nats://a:xxxxx@h2:4222"},
		{"nats://tok123@h:4222", "nats://xxxxx@h:4222"},
		{"http://prom:9090", "http://prom:9090"},
	}
	for _, tt := range tests {
		if got := redactURL(tt.in); got != tt.want {
			t.Errorf("redactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
