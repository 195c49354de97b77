package app

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"governor.dev/governor/internal/testenv"
	"governor.dev/governor/ui/auth"
)

// browser speaks HTTP to the UI like a browser on the same origin: it
// follows no redirects and keeps the session cookie itself (Go's cookie jar
// withholds Secure cookies from http:// URLs; browsers treat loopback as a
// secure context).
type browser struct {
	t      *testing.T
	base   string
	c      *http.Client
	cookie string
}

func (b *browser) do(method, path string, form url.Values) (int, string, http.Header) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if b.cookie != "" {
		req.AddCookie(&http.Cookie{Name: auth.CookieName, Value: b.cookie})
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == auth.CookieName {
			b.cookie = c.Value
		}
	}
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return resp.StatusCode, string(out), resp.Header
}

// TestDevStackServesUI starts the whole dev stack in one process, reads the
// first admin's one-time password from the banner, logs in over HTTP,
// chooses a new password as the UI demands, and sees the demo services on
// the overview and in the authenticated JSON API, while the same API refuses
// an anonymous caller and the engine's own API answers under /engine/api/v1.
func TestDevStackServesUI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the dev stack")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &testenv.Buffer{}
	cfg := testConfig(t)
	cfg.Demo.BadVersionAfter = 0
	// Warnings and errors, shown if a login fails.
	logs := &testenv.Buffer{}
	a, err := New(ctx, Options{Config: cfg, Stdout: out, BcryptCost: bcrypt.MinCost, AlertInterval: time.Second,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()

	var password string
	waitFor(t, 10*time.Second, "banner with the one-time password", func() bool {
		m := regexp.MustCompile(`first admin "admin" with the one-time password: (\S+)`).FindStringSubmatch(out.String())
		if m != nil {
			password = m[1]
		}
		return m != nil
	})
	if !strings.Contains(out.String(), "web UI:                 http://"+a.Addr()+"/") {
		t.Fatalf("banner without the UI URL:\n%s", out.String())
	}
	b := &browser{t: t, base: "http://" + a.Addr(), c: &http.Client{Timeout: 10 * slack * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}

	if code, _, _ := b.do(http.MethodGet, "/api/v1/overview", nil); code != http.StatusUnauthorized {
		t.Fatalf("anonymous GET /api/v1/overview: %d, want 401", code)
	}
	if code, _, h := b.do(http.MethodGet, "/", nil); code != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/login") {
		t.Fatalf("anonymous GET /: %d to %q, want a redirect to the login page", code, h.Get("Location"))
	}
	if code, _, _ := b.do(http.MethodPost, "/login", url.Values{"name": {"admin"}, "password": {"not-the-password"}}); code != http.StatusUnauthorized {
		t.Fatalf("login with a wrong password: %d, want 401; log:\n%s", code, logs.String())
	}
	code, _, h := b.do(http.MethodPost, "/login", url.Values{"name": {"admin"}, "password": {password}})
	if code != http.StatusSeeOther || h.Get("Location") != auth.PasswordPath || b.cookie == "" {
		t.Fatalf("login with the one-time password: %d to %q (cookie %t), want the password page; log:\n%s", code, h.Get("Location"), b.cookie != "", logs.String())
	}
	code, page, _ := b.do(http.MethodGet, auth.PasswordPath, nil)
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if code != http.StatusOK || m == nil {
		t.Fatalf("password page: %d without a CSRF token", code)
	}
	code, _, h = b.do(http.MethodPost, auth.PasswordPath, url.Values{"csrf": {m[1]}, "current": {password}, "next": {"a new password for the e2e test"}})
	if code != http.StatusSeeOther || h.Get("Location") != "/" {
		t.Fatalf("change password: %d to %q", code, h.Get("Location"))
	}

	services := []string{"checkout", "catalog", "search"}
	var overview string
	waitFor(t, 30*time.Second, "the demo services on the overview", func() bool {
		code, overview, _ = b.do(http.MethodGet, "/", nil)
		for _, s := range services {
			if code != http.StatusOK || !strings.Contains(overview, `/services/`+s) {
				return false
			}
		}
		return true
	})
	code, body, _ := b.do(http.MethodGet, "/api/v1/overview", nil)
	for _, s := range services {
		if code != http.StatusOK || !strings.Contains(body, `"`+s+`"`) {
			t.Fatalf("GET /api/v1/overview as admin: %d without %s: %.300s", code, s, body)
		}
	}
	if code, body, _ := b.do(http.MethodGet, "/engine/api/v1/services", nil); code != http.StatusOK || !strings.Contains(body, `"checkout"`) {
		t.Fatalf("GET /engine/api/v1/services: %d %.200s", code, body)
	}
	// Silences by matchers and their listing are served over the engine's
	// own alerts manager, not answered 503.
	if code, body, _ := b.do(http.MethodGet, "/api/v1/silences?state=active", nil); code != http.StatusOK {
		t.Fatalf("GET /api/v1/silences as admin: %d %.200s", code, body)
	}
	// The service page draws the signals from the embedded metrics store.
	waitFor(t, 20*time.Second, "signal charts on the service page", func() bool {
		code, body, _ := b.do(http.MethodGet, "/services/checkout", nil)
		if strings.Contains(body, "metrics source is unavailable") {
			t.Fatalf("service page: the metrics source is unavailable")
		}
		return code == http.StatusOK && strings.Contains(body, "Signals over")
	})
	if code, body, _ := b.do(http.MethodGet, "/alerts", nil); code != http.StatusOK || strings.Contains(body, "not configured") {
		t.Fatalf("alerts page: %d, configured %t", code, !strings.Contains(body, "not configured"))
	}

	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(20 * slack * time.Second):
		t.Fatal("engine did not stop within 20s")
	}
}
