// Command demo is a small service protected by the Governor SDK, with a
// built-in load generator, so that one command shows adaptive concurrency,
// priority shedding and rate limits at work.
//
// The service's /api/ handler simulates a backend with a fixed capacity: up
// to -capacity requests run in -work each; beyond that every request slows
// down in proportion (processor sharing), as a real service does when it is
// overloaded. The load generator sends -load requests per second with mixed
// priorities (X-Traffic-Priority) and user keys; once a second it prints what
// was served and what was refused by class. /metrics serves the SDK's metrics
// (docs/metrics.md) and the process metrics; /healthz is never governed.
//
//	go run ./cmd/demo                     # 1500 req/s against a capacity of ~1000 req/s
//	go run ./cmd/demo -load 0             # serve only; drive it with your own tool
//	go run ./cmd/demo -rules rules.json   # enforce your own ruleset (service "demo")
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"governor.dev/governor/cmd/internal/shutdown"
	"governor.dev/governor/sdk/rules"
)

// main stops cleanly at the first SIGINT or SIGTERM; a second one exits at
// once (package shutdown).
func main() {
	ctx, stop := shutdown.Notify(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// shutdownGrace bounds the wait for requests in progress at a stop.
const shutdownGrace = 5 * time.Second

// config is the demo's command line.
type config struct {
	addr     string
	capacity int
	work     time.Duration
	load     float64
	rules    string
	duration time.Duration
}

func parse(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "listen address")
	fs.IntVar(&c.capacity, "capacity", 20, "requests the simulated backend serves at full speed at once")
	fs.DurationVar(&c.work, "work", 20*time.Millisecond, "service time of one request at or below capacity")
	fs.Float64Var(&c.load, "load", 1500, "requests per second of the built-in load generator (0: off)")
	fs.StringVar(&c.rules, "rules", "", "JSON ruleset file for service \"demo\" (default: built-in rules)")
	fs.DurationVar(&c.duration, "duration", 0, "stop after this long (0: run until interrupted)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case c.capacity < 1:
		return c, fmt.Errorf("-capacity must be at least 1, got %d", c.capacity)
	case c.work <= 0:
		return c, fmt.Errorf("-work must be above 0, got %s", c.work)
	case c.load < 0 || c.load > 100000:
		return c, fmt.Errorf("-load must be between 0 and 100000, got %v", c.load)
	case c.duration < 0:
		return c, fmt.Errorf("-duration must be 0 (run until interrupted) or above, got %s", c.duration)
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return c, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	log := slog.New(slog.NewTextHandler(stderr, nil))
	cfg, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		log.Error("bad command line", "err", err)
		return 2
	}
	rs := defaultRules(cfg.capacity)
	if cfg.rules != "" {
		data, err := os.ReadFile(cfg.rules)
		if err == nil {
			rs, err = rules.Decode(data)
		}
		if err != nil {
			log.Error("cannot load rules", "file", cfg.rules, "err", err)
			return 2
		}
	}
	d, err := newDemo(cfg, rs)
	if err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	defer d.close()
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		log.Error("cannot listen", "addr", cfg.addr, "err", err)
		return 1
	}
	if cfg.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.duration)
		defer cancel()
	}
	srv := &http.Server{Handler: d.handler(), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	base := "http://" + ln.Addr().String()
	log.Info("demo service listening", "url", base+"/api/work", "metrics", base+"/metrics",
		"capacity", cfg.capacity, "work", cfg.work, "load", cfg.load)
	// The load stops before the server shuts down, and run returns only
	// once it has: its connections would hold up the shutdown, and its
	// report reads the governor closed at return.
	loadCtx, stopLoad := context.WithCancel(ctx)
	loadDone := make(chan struct{})
	if cfg.load > 0 {
		go func() {
			defer close(loadDone)
			newLoad(d, base, cfg.load, stdout).run(loadCtx)
		}()
	} else {
		close(loadDone)
	}
	defer func() {
		stopLoad()
		<-loadDone
	}()
	select {
	case <-ctx.Done():
	case err := <-errc:
		log.Error("server stopped", "err", err)
		return 1
	}
	stopLoad()
	<-loadDone
	shutdown, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		// Closing their connections ends the requests still running
		// (their contexts end): none outlives run and the governor it
		// uses, closed at return.
		_ = srv.Close()
		log.Error("shutdown: requests still running after the grace; their connections are closed", "grace", shutdownGrace, "err", err)
		return 1
	}
	return 0
}
