package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFirstStartPrintsOneTimePassword starts the command on a random
// loopback port: it prints the first admin's one-time password (once), serves
// the login page, and stops when its context ends.
func TestFirstStartPrintsOneTimePassword(t *testing.T) {
	db := filepath.Join(t.TempDir(), "web.db")
	start := func() (string, string, func()) {
		ctx, cancel := context.WithCancel(context.Background())
		pr, pw := io.Pipe()
		done := make(chan int)
		go func() {
			done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-sqlite", db}, pw, io.Discard)
			_ = pw.Close()
		}()
		sc := bufio.NewScanner(pr)
		var out []string
		url := ""
		for sc.Scan() {
			out = append(out, sc.Text())
			if m := regexp.MustCompile(`on (http://\S+)/$`).FindStringSubmatch(sc.Text()); m != nil {
				url = m[1]
				break
			}
		}
		go func() { _, _ = io.Copy(io.Discard, pr) }()
		return url, strings.Join(out, "\n"), func() { cancel(); require.Equal(t, 0, <-done) }
	}
	url, out, stop := start()
	require.Regexp(t, `Created the first admin "admin" with the one-time password: \S{20,}`, out)
	resp, err := http.Get(url + "/login")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	stop()

	url, out, stop = start()
	defer stop()
	require.NotContains(t, out, "one-time password", "only on the first start")
	require.NotEmpty(t, url)
}

func TestBadFlags(t *testing.T) {
	require.Equal(t, 2, run(context.Background(), []string{"-nope"}, io.Discard, io.Discard))
}
