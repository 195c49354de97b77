package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"governor.dev/governor/internal/sqlitedb"
	"governor.dev/governor/internal/testenv"
	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/ui/auth"
)

// web is the command running in-process.
type web struct {
	url    string
	out    string // stdout up to the "web UI on" line
	stderr *testenv.Buffer
	cancel context.CancelFunc
	done   chan int
}

// stop ends the command's context and returns its exit code.
func (w *web) stop(t *testing.T) int {
	t.Helper()
	w.cancel()
	select {
	case code := <-w.done:
		return code
	case <-time.After(time.Minute):
		t.Fatal("web did not stop")
		return -1
	}
}

// start runs the command with args on a random loopback port and waits
// until it serves.
func start(t *testing.T, args ...string) *web {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	w := &web{stderr: &testenv.Buffer{}, cancel: cancel, done: make(chan int, 1)}
	go func() {
		w.done <- run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), pw, w.stderr)
		_ = pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	var out []string
	for sc.Scan() {
		out = append(out, sc.Text())
		if m := regexp.MustCompile(`on (http://\S+)/$`).FindStringSubmatch(sc.Text()); m != nil {
			w.url = m[1]
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	w.out = strings.Join(out, "\n")
	if w.url == "" {
		cancel()
		t.Fatalf("web did not start: %s\n%s", w.out, w.stderr)
	}
	t.Cleanup(func() { cancel() })
	return w
}

// TestFirstStartPrintsOneTimePassword starts the command on a random
// loopback port: it prints the first admin's one-time password (once), serves
// the login page, and stops when its context ends.
func TestFirstStartPrintsOneTimePassword(t *testing.T) {
	db := filepath.Join(t.TempDir(), "web.db")
	w := start(t, "-sqlite", db)
	require.Regexp(t, `Created the first admin "admin" with the one-time password: \S{20,}`, w.out)
	resp, err := http.Get(w.url + "/login")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, 0, w.stop(t))

	w = start(t, "-sqlite", db)
	require.NotContains(t, w.out, "one-time password", "only on the first start")
	require.Equal(t, 0, w.stop(t))
}

// TestFailedListenCreatesNoAdmin: the address is taken (another process, a
// replica not yet stopped). The start fails naming -addr, and since the
// one-time password is shown only once, it must not have created the first
// admin: the next start, on a free port, prints it.
func TestFailedListenCreatesNoAdmin(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	db := filepath.Join(t.TempDir(), "web.db")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-addr", taken.Addr().String(), "-sqlite", db}, &stdout, &stderr)
	require.Equal(t, 1, code)
	require.Contains(t, stderr.String(), "-addr")
	require.NotContains(t, stdout.String(), "one-time password")

	w := start(t, "-sqlite", db)
	require.Contains(t, w.out, "one-time password")
	require.Equal(t, 0, w.stop(t))
}

// seedUser creates a viewer named name (no admin role) on the database
// file, as a database whose admin was lost would hold.
func seedUser(t *testing.T, path, name string) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: path})
	require.NoError(t, err)
	defer st.Close()
	db, err := sqlitedb.Open(path, sqlitedb.Options{})
	require.NoError(t, err)
	defer db.Close()
	am, err := auth.New(ctx, auth.Options{DB: db, Dialect: migrations.SQLite, Auditor: st, BcryptCost: bcrypt.MinCost})
	require.NoError(t, err)
	_, err = am.CreateUser(ctx, name, "a-long-password-1", []versioning.Role{versioning.RoleViewer}, false)
	require.NoError(t, err)
}

// TestStartWithoutAdminSaysItCreatedTheAdmin: on a database whose users
// hold no admin role and none is named like the configured admin, the
// start creates it and says so, as a recovery, not as "the first admin"
// of a fresh installation; the next start prints nothing.
func TestStartWithoutAdminSaysItCreatedTheAdmin(t *testing.T) {
	db := filepath.Join(t.TempDir(), "web.db")
	seedUser(t, db, "ops")
	w := start(t, "-sqlite", db)
	require.NotContains(t, w.out, "first admin")
	require.Regexp(t, `No user held the admin role: created the admin "admin" with the one-time password: \S{20,}`, w.out)
	require.Equal(t, 0, w.stop(t))

	w = start(t, "-sqlite", db)
	require.NotContains(t, w.out, "admin")
	require.Equal(t, 0, w.stop(t))
}

// TestStartWithoutAdminSaysItPromotedTheExistingUser: on a database whose
// users hold no admin role, the existing user named like the configured
// admin (ignoring case) is given the role and keeps their password; the
// start says so, with no one-time password.
func TestStartWithoutAdminSaysItPromotedTheExistingUser(t *testing.T) {
	db := filepath.Join(t.TempDir(), "web.db")
	seedUser(t, db, "Admin")
	w := start(t, "-sqlite", db)
	require.Contains(t, w.out, `No user held the admin role: gave it to the existing user "Admin", who logs in with their own password.`)
	require.NotContains(t, w.out, "one-time password")
	require.Equal(t, 0, w.stop(t))
}

// TestBadCommandLineRefused: a bad value is refused with exit 2 naming its
// flag, before anything is opened (no database file appears), and a stray
// argument, which would stop flag parsing and silently drop the flags
// after it, is refused too.
func TestBadCommandLineRefused(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"engine not http", []string{"-engine", "ftp://x"}, "-engine"},
		{"prometheus not a URL", []string{"-prometheus", "::bad"}, "-prometheus"},
		{"addr without port", []string{"-addr", "nope"}, "-addr"},
		{"admin name", []string{"-admin", "a b"}, "-admin"},
		{"trusted proxy", []string{"-trusted-proxies", "10.0.0.0/8,nope"}, "-trusted-proxies"},
		{"engine max age", []string{"-engine-max-age", "0s"}, "-engine-max-age"},
		{"postgres not a URL", []string{"-postgres", "host=db"}, "-postgres"},
		{"empty sqlite", []string{"-sqlite", ""}, "-sqlite"},
		{"stray argument", []string{"-addr", "127.0.0.1:0", "stray", "-postgres", "postgres://x"}, "unexpected arguments"},
		{"unknown flag", []string{"-nope"}, "-nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			db := filepath.Join(dir, "web.db")
			var stdout, stderr bytes.Buffer
			// The context has ended: were the command line accepted, the
			// command would stop at once instead of serving.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			code := run(ctx, append([]string{"-sqlite", db}, tt.args...), &stdout, &stderr)
			require.Equal(t, 2, code, stderr.String())
			require.Contains(t, stderr.String(), tt.want)
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Empty(t, entries, "nothing is opened for a bad command line")
		})
	}
	require.Equal(t, 0, run(context.Background(), []string{"-h"}, io.Discard, io.Discard))
}

// seedSession creates a viewer and logs them in on the database file,
// returning the session cookie's value.
func seedSession(t *testing.T, path string) string {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: path})
	require.NoError(t, err)
	defer st.Close()
	db, err := sqlitedb.Open(path, sqlitedb.Options{})
	require.NoError(t, err)
	defer db.Close()
	am, err := auth.New(ctx, auth.Options{DB: db, Dialect: migrations.SQLite, Auditor: st, BcryptCost: bcrypt.MinCost})
	require.NoError(t, err)
	const pw = "a-long-password-1"
	_, err = am.CreateUser(ctx, "ops", pw, []versioning.Role{versioning.RoleViewer}, false)
	require.NoError(t, err)
	s, _, err := am.Login(ctx, "ops", pw, "127.0.0.1")
	require.NoError(t, err)
	return s.ID
}

// TestStopEndsLiveStreams: a browser tab on the overview holds a live
// stream (Server-Sent Events) that never finishes by itself. At SIGTERM the
// stream ends and the command stops cleanly (exit 0), instead of waiting
// out the drain timeout and reporting a failed stop.
func TestStopEndsLiveStreams(t *testing.T) {
	path := filepath.Join(t.TempDir(), "web.db")
	sid := seedSession(t, path)
	w := start(t, "-sqlite", path)
	req, err := http.NewRequest(http.MethodGet, w.url+"/events/overview", nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	req.AddCookie(&http.Cookie{Name: auth.CookieName, Value: sid})
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, line, "event:", "the stream is live")

	require.Equal(t, 0, w.stop(t), w.stderr.String())
}

// proxy forwards TCP connections to target until cut, which closes its
// listener and every connection: the database "goes away".
type proxy struct {
	ln     net.Listener
	mu     sync.Mutex
	conns  []net.Conn
	target string
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{ln: ln, target: target}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(u, c); _ = u.Close() }()
			go func() { _, _ = io.Copy(c, u); _ = c.Close() }()
		}
	}()
	t.Cleanup(p.cut)
	return p
}

func (p *proxy) cut() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}

// TestReadyzFollowsTheDatabase: replicas behind a load balancer on one
// PostgreSQL. While the database answers, /readyz says ready; when it goes
// away, /readyz answers 503 naming the database (the balancer stops sending
// traffic) while /healthz still answers 200 (the process is alive, no
// restart needed).
func TestReadyzFollowsTheDatabase(t *testing.T) {
	dsn := testenv.Postgres(t)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	p := newProxy(t, u.Host)
	u.Host = p.ln.Addr().String()
	w := start(t, "-postgres", u.String())

	get := func(path string) (int, string) {
		resp, err := http.Get(w.url + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get("/readyz")
	require.Equal(t, http.StatusOK, code, body)

	p.cut()
	deadline := time.Now().Add(30 * time.Second)
	for code == http.StatusOK && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		code, body = get("/readyz")
	}
	require.Equal(t, http.StatusServiceUnavailable, code, body)
	require.Contains(t, body, `"error":"database:`)
	code, _ = get("/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, 0, w.stop(t))
}

// TestDemoStopsCleanly: with -demo, the incident script writing to the
// store ends before the store closes, and the stop is clean.
func TestDemoStopsCleanly(t *testing.T) {
	w := start(t, "-sqlite", filepath.Join(t.TempDir(), "web.db"), "-demo")
	resp, err := http.Get(w.url + "/healthz")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, 0, w.stop(t), w.stderr.String())
}

// TestSignalDuringStartExitsZero: a SIGTERM that arrives while the UI
// starts (its database being opened) is a stop the operator asked for:
// exit 0, not 1 with the interrupted open logged as an error.
func TestSignalDuringStartExitsZero(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stderr testenv.Buffer
	code := run(ctx, []string{"-addr", "127.0.0.1:0", "-sqlite", filepath.Join(t.TempDir(), "g.db")}, io.Discard, &stderr)
	if code != 0 {
		t.Fatalf("exit %d, want 0\n%s", code, stderr.String())
	}
}
