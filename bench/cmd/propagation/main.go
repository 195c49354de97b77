// Command propagation measures approve-to-ACK latency of rule distribution:
// it starts N SDK watchers (sdk/watch), each with its own NATS connection,
// publishes a series of versions to the JetStream KV bucket the way the
// control plane's relay does (read the key, compare-and-set), and records
// when every watcher's ACK arrives. The clock starts just before the
// publication, i.e. when the relay picks up an approved version.
//
//	go run ./cmd/propagation -watchers 1000 -json
//
// prints {"watchers": n, "versions": n, "p50_ms": x, "p99_ms": y,
// "max_ms": z, "missed": n}. By default it runs against an embedded NATS
// server; -server machine uses the NATS at -url (default $GOVERNOR_TEST_NATS
// or nats://127.0.0.1:4222).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"time"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("propagation", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Watchers, "watchers", cfg.Watchers, "SDK watchers, each with its own NATS connection")
	fs.IntVar(&cfg.Versions, "versions", cfg.Versions, "versions to approve and measure")
	fs.StringVar(&cfg.Server, "server", cfg.Server, "NATS to use: embedded or machine")
	fs.StringVar(&cfg.URL, "url", cfg.URL, "NATS URL for -server machine")
	fs.DurationVar(&cfg.Interval, "interval", cfg.Interval, "pause between one version's last ACK and the next approval")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "how long to wait for a version's ACKs before counting the rest as missed")
	fs.BoolVar(&cfg.Verbose, "v", false, "print each version's figures to stderr")
	asJSON := fs.Bool("json", false, "print the result as one JSON object")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "propagation:", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "propagation:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := Run(ctx, cfg, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "propagation:", err)
		return 1
	}
	if *asJSON {
		_ = json.NewEncoder(stdout).Encode(res)
	} else {
		fmt.Fprintf(stdout, "%d watchers, %d versions: p50 %.1f ms, p99 %.1f ms, max %.1f ms, missed %d\n",
			res.Watchers, res.Versions, res.P50MS, res.P99MS, res.MaxMS, res.Missed)
	}
	if res.Missed > 0 {
		return 1
	}
	return 0
}

// DefaultConfig is the benchmark: 1,000 watchers, 50 versions,
// embedded NATS.
func DefaultConfig() Config {
	url := os.Getenv("GOVERNOR_TEST_NATS")
	if url == "" {
		url = "nats://127.0.0.1:4222"
	}
	return Config{Watchers: 1000, Versions: 50, Server: "embedded", URL: url,
		Interval: 50 * time.Millisecond, Timeout: 10 * time.Second}
}
