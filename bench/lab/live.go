package lab

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"time"

	"governor.dev/governor/bench/limiters"
	"governor.dev/governor/bench/report"
	"governor.dev/governor/bench/scenario"
	"governor.dev/governor/sdk/rules"
)

// Live-mode bounds: a run stops by itself.
const (
	// MaxLiveRequests bounds the first attempts of one live run.
	MaxLiveRequests = 400_000
	// CalibrationTime is how long the capacity is measured at the start of
	// every live run.
	CalibrationTime = 3 * time.Second
)

// ErrTooBig is returned for a scenario too large to run live.
var ErrTooBig = errors.New("lab: scenario too large for live mode")

// DefaultLiveLimiters are the limiters a live run compares by default.
var DefaultLiveLimiters = []string{"governor", "governor-nodeadline", "governor-little", "aegis-bbr", "failsafe-adaptive", "gozero-shedder", "xrate", "static", "none"}

// LiveOptions configure RunLive.
type LiveOptions struct {
	// Logger receives progress; nil discards.
	Logger *slog.Logger
	// Stderr receives the child processes' stderr; nil discards.
	Stderr io.Writer
	// Executable is the binary to start as server and load generator
	// (it must dispatch -role to Child); default os.Executable().
	Executable string
	// Ruleset, when set, replaces Governor's default ruleset in the
	// governor limiters (JSON as rules.Decode reads it; see
	// limiters.Options.Ruleset): the peers ignore it. RunLive checks it
	// before calibrating.
	Ruleset json.RawMessage
}

// childConfig is what the parent writes to a child's stdin.
type childConfig struct {
	Scenario    json.RawMessage `json:"scenario"`
	Limiter     string          `json:"limiter,omitempty"`
	CapacityRPS float64         `json:"capacity_rps,omitempty"`
	Addr        string          `json:"addr,omitempty"`
	Calibrate   bool            `json:"calibrate,omitempty"`
	// BurnPerNs is the handler's work rate (xorshift rounds per ns) the
	// calibration run's server measured; every limiter's server uses it, so
	// a server that starts while other processes load the machine does not
	// measure a slower rate and then do less work per request (0: measure).
	BurnPerNs float64 `json:"burn_per_ns,omitempty"`
	// Ruleset is LiveOptions.Ruleset, for the server.
	Ruleset json.RawMessage `json:"ruleset,omitempty"`
}

// serverOptions are the options the server child builds its limiter with.
func serverOptions(s *scenario.Scenario, cfg childConfig) (limiters.Options, error) {
	lo := limiters.Options{CapacityRPS: cfg.CapacityRPS, StaticLimit: s.StaticLimit(cfg.CapacityRPS)}
	if cfg.Ruleset != nil {
		rs, err := rules.Decode(cfg.Ruleset)
		if err != nil {
			return lo, fmt.Errorf("lab: server: ruleset: %w", err)
		}
		lo.Ruleset = rs
	}
	return lo, nil
}

// childResult is what the load generator prints (and, in Limits, what the
// server prints when it stops).
type childResult struct {
	CapacityRPS float64          `json:"capacity_rps,omitempty"`
	Attempts    []report.Attempt `json:"attempts,omitempty"`
	Limits      []int            `json:"limits,omitempty"`
	// BurnPerNs is the work rate the server used (see childConfig).
	BurnPerNs float64 `json:"burn_per_ns,omitempty"`
}

// RunLive runs the scenario on loopback: for every limiter, a server
// process (GOMAXPROCS=1) and an open-loop load generator process
// (GOMAXPROCS=1). The server's capacity is calibrated first, against the
// "none" limiter. list is a comma-separated list of limiters (empty: the
// defaults).
func RunLive(ctx context.Context, s *scenario.Scenario, list string, o LiveOptions) (report.Run, error) {
	names := DefaultLiveLimiters
	if list != "" {
		var err error
		if names, err = limiters.ParseList(list); err != nil {
			return report.Run{}, err
		}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	if o.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return report.Run{}, fmt.Errorf("lab: %w", err)
		}
		o.Executable = exe
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return report.Run{}, fmt.Errorf("lab: %w", err)
	}
	if o.Ruleset != nil {
		rs, err := rules.Decode(o.Ruleset)
		if err != nil {
			return report.Run{}, fmt.Errorf("lab: ruleset: %w", err)
		}
		if _, err := limiters.CheckRuleset(rs); err != nil {
			return report.Run{}, fmt.Errorf("lab: %w", err)
		}
	}
	cal, err := liveOnce(ctx, o, childConfig{Scenario: raw, Limiter: "none", Calibrate: true})
	if err != nil {
		return report.Run{}, err
	}
	if n := s.MaxRate(cal.CapacityRPS) * s.Length().Seconds(); n > MaxLiveRequests {
		return report.Run{}, fmt.Errorf("%w: up to %.0f requests, at most %d", ErrTooBig, n, MaxLiveRequests)
	}
	run := report.Run{Scenario: s.Name, Mode: ModeLive, CapacityRPS: round(cal.CapacityRPS)}
	o.Logger.Info("calibrated", "scenario", s.Name, "capacity_rps", round(cal.CapacityRPS))
	for _, name := range names {
		res, err := liveOnce(ctx, o, childConfig{Scenario: raw, Limiter: name, CapacityRPS: cal.CapacityRPS, BurnPerNs: cal.BurnPerNs,
			Ruleset: o.Ruleset})
		if err != nil {
			return run, fmt.Errorf("lab: live %s: %w", name, err)
		}
		r := report.Measure(name, s, cal.CapacityRPS, res.Attempts)
		r.Detail.LimitShrinkS = limitShrink(s, res.Limits)
		o.Logger.Info("measured", "scenario", s.Name, "limiter", name, "goodput_rps", r.GoodputRPS, "goodput_ratio", r.GoodputRatio,
			"limit_shrink_s", r.Detail.LimitShrinkS)
		run.Results = append(run.Results, r)
	}
	return run, nil
}

// liveOnce starts a server with cfg.Limiter and a load generator against
// it, and returns what the load generator reported.
func liveOnce(ctx context.Context, o LiveOptions, cfg childConfig) (out childResult, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv := child(ctx, o, "server")
	srvIn, err := srv.StdinPipe()
	if err != nil {
		return out, err
	}
	srvOut, err := srv.StdoutPipe()
	if err != nil {
		return out, err
	}
	if err := srv.Start(); err != nil {
		return out, fmt.Errorf("lab: start server: %w", err)
	}
	defer func() {
		srvIn.Close() // the server exits when its stdin closes
		done := make(chan struct{})
		go func() { srv.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			srv.Process.Kill()
			<-done
		}
	}()
	if err := json.NewEncoder(srvIn).Encode(cfg); err != nil {
		return out, fmt.Errorf("lab: configure server: %w", err)
	}
	var hello struct {
		Addr      string
		BurnPerNs float64 `json:"burn_per_ns"`
	}
	br := bufio.NewReader(srvOut)
	line, err := br.ReadBytes('\n')
	if err != nil || json.Unmarshal(line, &hello) != nil || hello.Addr == "" {
		return out, fmt.Errorf("lab: server did not report its address (%v)", err)
	}
	// Read the rest (never let a chatty library block the server on a full
	// pipe), keeping the limit trace the server prints when it stops.
	traced := make(chan []int, 1)
	go func() {
		var limits []int
		for {
			line, err := br.ReadBytes('\n')
			var tr struct{ Limits []int }
			if json.Unmarshal(line, &tr) == nil && tr.Limits != nil {
				limits = tr.Limits
			}
			if err != nil {
				traced <- limits
				return
			}
		}
	}()
	defer func() {
		srvIn.Close()
		select {
		case out.Limits = <-traced:
		case <-time.After(5 * time.Second):
		}
	}()
	cfg.Addr = hello.Addr
	lg := child(ctx, o, "loadgen")
	in, _ := json.Marshal(cfg)
	lg.Stdin = bytes.NewReader(in)
	b, err := lg.Output()
	if err != nil {
		return out, fmt.Errorf("lab: load generator: %w", err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return out, fmt.Errorf("lab: load generator output: %w", err)
	}
	out.BurnPerNs = hello.BurnPerNs
	return out, nil
}

func child(ctx context.Context, o LiveOptions, role string) *exec.Cmd {
	c := exec.CommandContext(ctx, o.Executable, "-role", role)
	c.Env = append(os.Environ(), "GOMAXPROCS=1")
	c.Stderr = o.Stderr
	c.WaitDelay = 5 * time.Second
	return c
}

// Child runs a live-mode child process: it reads its configuration from
// in and writes its report to out. role is "server" or "loadgen".
func Child(ctx context.Context, role string, in io.Reader, out io.Writer) error {
	dec := json.NewDecoder(in)
	var cfg childConfig
	if err := dec.Decode(&cfg); err != nil {
		return fmt.Errorf("lab: %s: read config: %w", role, err)
	}
	s, err := scenario.Decode(cfg.Scenario)
	if err != nil {
		return err
	}
	// Never outlive the run by much, whatever the parent does.
	life := s.Length() + CalibrationTime + 2*time.Minute
	ctx, cancel := context.WithTimeout(ctx, life)
	defer cancel()
	switch role {
	case "server":
		lo, err := serverOptions(s, cfg)
		if err != nil {
			return err
		}
		lim, err := limiters.New(cfg.Limiter, lo)
		if err != nil {
			return err
		}
		defer lim.Close()
		go func() { // stdin closing is the parent's stop signal
			io.Copy(io.Discard, in)
			cancel()
		}()
		sv := newServer(s, lim, cfg.BurnPerNs)
		err = sv.serve(ctx, func(addr string) error {
			return json.NewEncoder(out).Encode(map[string]any{"addr": addr, "burn_per_ns": sv.burn.perNs})
		})
		if err != nil {
			return err
		}
		return json.NewEncoder(out).Encode(childResult{Limits: sv.Limits()})
	case "loadgen":
		base := "http://" + cfg.Addr
		if cfg.Calibrate {
			c, err := calibrate(ctx, s, base, CalibrationTime)
			if err != nil {
				return err
			}
			return json.NewEncoder(out).Encode(childResult{CapacityRPS: c})
		}
		lg := &loadgen{s: s, base: base, client: newClient(), budget: scenario.NewBudget(s.Client.RetryBudget),
			reqs: scenario.NewSource(s, 0).Requests(cfg.CapacityRPS)}
		atts, err := lg.run(ctx)
		if err != nil {
			return err
		}
		return json.NewEncoder(out).Encode(childResult{Attempts: atts})
	default:
		return fmt.Errorf("lab: unknown role %q", role)
	}
}
