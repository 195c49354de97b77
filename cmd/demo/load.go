package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"governor.dev/governor/sdk/rules"
)

// load is an open-loop load generator: it sends requests at a fixed rate
// whatever the answers, as real users do, with mixed priorities.
type load struct {
	d      *demo
	url    string
	rate   float64
	out    io.Writer
	client *http.Client
	conns  *conns
	// counts[class][result]: 0 ok, 1 429, 2 other failure.
	counts [4][3]atomic.Int64
}

// mix is the share of each class in the generated traffic.
var mix = [4]float64{0.1, 0.3, 0.3, 0.3}

func newLoad(d *demo, base string, rate float64, out io.Writer) *load {
	c := &conns{open: map[net.Conn]struct{}{}}
	return &load{d: d, url: base + "/api/work", rate: rate, out: out, conns: c, client: &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 1024, MaxConnsPerHost: 2048, DialContext: c.dial},
	}}
}

// run sends load until ctx ends, then returns once every request has ended
// and every connection it dialed is closed.
func (l *load) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer l.conns.closeAll()
	defer wg.Wait()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	report := time.NewTicker(time.Second)
	defer report.Stop()
	perTick := l.rate / 100
	var carry float64
	start := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-report.C:
			l.report(time.Since(start))
		case <-tick.C:
			carry += perTick
			for ; carry >= 1; carry-- {
				wg.Add(1)
				go func() {
					defer wg.Done()
					l.one(ctx)
				}()
			}
		}
	}
}

func (l *load) one(ctx context.Context) {
	c := pick(rand.Float64())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.url, nil)
	if err != nil {
		return
	}
	req.Header.Set("X-Traffic-Priority", string(rules.Classes[c]))
	req.Header.Set("X-User", "user-"+strconv.Itoa(rand.IntN(500)))
	resp, err := l.client.Do(req)
	result := 2
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			result = 0
		case http.StatusTooManyRequests:
			result = 1
		}
	}
	if ctx.Err() == nil {
		l.counts[c][result].Add(1)
	}
}

func pick(u float64) int {
	for c, share := range mix {
		if u < share {
			return c
		}
		u -= share
	}
	return len(mix) - 1
}

// report prints the last second: served and refused per class, the limit and
// the requests in flight.
func (l *load) report(elapsed time.Duration) {
	limit, _ := l.d.g.Limit("api")
	line := fmt.Sprintf("t=%3ds limit=%-4d inflight=%-4d", int(elapsed.Seconds()), limit, l.d.g.InFlight("api"))
	for c := range l.counts {
		ok, refused, failed := l.counts[c][0].Swap(0), l.counts[c][1].Swap(0), l.counts[c][2].Swap(0)
		line += fmt.Sprintf(" | %-8s ok=%-4d 429=%-4d err=%-3d", rules.Classes[c], ok, refused, failed)
	}
	fmt.Fprintln(l.out, line)
}

// conns tracks the connections a load generator dials, so that stopping it
// closes every one. A connection dialed for a request canceled before it
// was sent joins the client's idle pool unused, or arrives after the pool
// was emptied; the server counts such a connection as active for 5s when it
// shuts down, so it would hold up the stop and make it fail.
type conns struct {
	mu     sync.Mutex
	open   map[net.Conn]struct{}
	closed bool
}

func (c *conns) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		conn.Close()
		return nil, net.ErrClosed
	}
	c.open[conn] = struct{}{}
	return &trackedConn{Conn: conn, c: c}, nil
}

// closeAll closes every connection dialed and refuses the dials to come.
func (c *conns) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for conn := range c.open {
		conn.Close()
	}
	clear(c.open)
}

type trackedConn struct {
	net.Conn
	c *conns
}

func (t *trackedConn) Close() error {
	t.c.mu.Lock()
	delete(t.c.open, t.Conn)
	t.c.mu.Unlock()
	return t.Conn.Close()
}
