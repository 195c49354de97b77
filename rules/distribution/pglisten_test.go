package distribution

import (
	"context"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"governor.dev/governor/internal/testenv"
)

// cuttingProxy forwards TCP connections to target. cut leaves every
// connection open so far open but silent both ways, as a failover leaves
// a client's connection to the old primary half-open: nothing arrives,
// nothing fails. Connections made after it are forwarded again.
type cuttingProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []*atomic.Bool // dead flags of the connections so far
}

func newCuttingProxy(t *testing.T, target string) *cuttingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cuttingProxy{ln: ln, target: target}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			dead := new(atomic.Bool)
			p.mu.Lock()
			p.conns = append(p.conns, dead)
			p.mu.Unlock()
			t.Cleanup(func() { _, _ = c.Close(), up.Close() })
			go pipe(c, up, dead)
			go pipe(up, c, dead)
		}
	}()
	return p
}

// pipe copies from src to dst until either fails, dropping what it reads
// once dead is set.
func pipe(src, dst net.Conn, dead *atomic.Bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !dead.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *cuttingProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range p.conns {
		d.Store(true)
	}
}

// TestListenPostgresLeavesAConnectionThatWentSilent: after a failover that
// left its connection half-open, the listener heard nothing and reported
// nothing until TCP keepalive gave up (minutes), and the relay woke only at
// its sweeps. A connection quiet for Check is pinged; one that does not
// answer is dropped, logged, and replaced, and the new one wakes the relay
// and hears the next NOTIFY.
func TestListenPostgresLeavesAConnectionThatWentSilent(t *testing.T) {
	pgURL := machinePostgres(t)
	u, err := url.Parse(pgURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newCuttingProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	var logs testenv.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wake := ListenPostgres(ctx, ListenOptions{URL: u.String(), Channel: "governor_outbox_cut_test", RetryWait: 10 * time.Millisecond,
		Check: 200 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	waitWake(t, wake, "the wake-up after connecting")
	proxy.cut()
	waitWake(t, wake, "the wake-up after replacing the silent connection")
	if !strings.Contains(logs.String(), "does not answer a ping") {
		t.Fatalf("the dropped connection is not logged: %s", logs.String())
	}
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT pg_notify('governor_outbox_cut_test', 'checkout')"); err != nil {
		t.Fatal(err)
	}
	waitWake(t, wake, "the wake-up on NOTIFY over the new connection")
}
