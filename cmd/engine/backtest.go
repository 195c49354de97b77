package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"governor.dev/governor/engine/backtest"
	"governor.dev/governor/engine/config"
	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/recommend"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/promapi"
	"governor.dev/governor/sdk/rules"
)

// runBacktest is `engine backtest -service S -from T1 -to T2`: replay the
// recorded metrics of a Prometheus-compatible API through the recommender.
func runBacktest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("backtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	service := fs.String("service", "", "service to replay (required)")
	from := fs.String("from", "", "start, RFC 3339 (e.g. 2026-11-30T10:00:00Z) or a duration before now (e.g. 2h) (required)")
	to := fs.String("to", "", "end, RFC 3339 or a duration before now; default now")
	step := fs.Duration("step", 0, "evaluation step; default the configured interval")
	prom := fs.String("prometheus", os.Getenv("GOVERNOR_PROMETHEUS_URL"), "Prometheus query API holding the recorded metrics (required; GOVERNOR_PROMETHEUS_URL)")
	rulesFile := fs.String("rules", "", "JSON ruleset in force at the start (required)")
	cfgFile := fs.String("config", os.Getenv("GOVERNOR_CONFIG"), "engine configuration for the load score, recommender and bands")
	asJSON := fs.Bool("json", false, "print one JSON object per proposal")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	now := time.Now()
	t1, err1 := parseTime(*from, now)
	t2, err2 := parseTime(*to, now)
	var errs []error
	if *service == "" {
		errs = append(errs, errors.New("-service is required"))
	}
	if *from == "" || err1 != nil {
		errs = append(errs, fmt.Errorf("-from: %q: want RFC 3339 or a duration (%v)", *from, err1))
	}
	if err2 != nil {
		errs = append(errs, fmt.Errorf("-to: %q: want RFC 3339 or a duration (%v)", *to, err2))
	}
	if *prom == "" {
		errs = append(errs, errors.New("-prometheus is required (the embedded store keeps no history across runs)"))
	}
	if *rulesFile == "" {
		errs = append(errs, errors.New("-rules is required"))
	}
	cfg := config.Default()
	if *cfgFile != "" {
		var err error
		if cfg, err = config.LoadFile(*cfgFile, cfg); err == nil {
			err = cfg.Validate()
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 || fs.NArg() > 0 {
		fmt.Fprintf(stderr, "engine backtest:\n%v\n", errors.Join(errs...))
		fs.Usage()
		return 2
	}
	data, err := os.ReadFile(*rulesFile)
	var rs *rules.Ruleset
	if err == nil {
		rs, err = rules.Decode(data)
	}
	if err != nil {
		fmt.Fprintf(stderr, "engine backtest: -rules %s: %v\n", *rulesFile, err)
		return 2
	}
	src, err := promapi.New(promapi.Options{Address: *prom})
	if err != nil {
		fmt.Fprintf(stderr, "engine backtest: %v\n", err)
		return 2
	}
	if *step == 0 {
		*step = cfg.Interval
	}
	o := backtest.Options{Source: src, Service: *service, From: t1, To: t2, Step: *step, Ruleset: rs,
		Reader:    signals.ReaderOptions{Window: cfg.Metrics.Window, MaxAge: -1},
		LoadScore: loadscore.Options{Targets: loadscore.Targets{Latency: cfg.Score.Latency}, HalfLife: cfg.Score.HalfLife},
		Recommend: recommend.DefaultOptions(),
	}
	if len(cfg.Score.Weights) > 0 {
		o.LoadScore.Weights = loadscore.Weights{}
		for t, w := range cfg.Score.Weights {
			o.LoadScore.Weights[loadscore.Term(t)] = w
		}
	}
	r := cfg.Recommend
	o.Recommend.Setpoint, o.Recommend.Gains = r.Setpoint, recommend.Gains{Kp: r.Kp, Ki: r.Ki, Kd: r.Kd}
	o.Recommend.MinChange, o.Recommend.MinScores, o.Recommend.Thresholds.MinSamples = r.MinChange, r.MinScores, r.BaselineSamples
	b, ok := cfg.Bands.Services[*service]
	if !ok {
		b = cfg.Bands.Default
	}
	o.Band = recommend.Band{Manual: b.Manual, MaxChangePerHour: b.MaxChangePerHour, Floor: b.Floor, Ceiling: b.Ceiling}
	enc := json.NewEncoder(stdout)
	sum, err := backtest.Run(ctx, o, func(p backtest.Proposal) {
		if *asJSON {
			_ = enc.Encode(p)
			return
		}
		how := "needs approval"
		if p.AutoApply {
			how = "would apply itself"
		}
		fmt.Fprintf(stdout, "%s  v%-4d %-18s %s\n", p.At.Format(time.RFC3339), p.Version, how, p.Reason)
	})
	if err != nil {
		fmt.Fprintf(stderr, "engine backtest: %v\n", err)
		return 1
	}
	if !*asJSON {
		fmt.Fprintf(stdout, "%d steps, %d known load scores (max %.2f), %d inconclusive; %d proposals, %d inside the band\n",
			sum.Steps, sum.KnownScores, sum.MaxScore, sum.Inconclusive, sum.Proposals, sum.AutoApplied)
	}
	return 0
}

// parseTime reads RFC 3339 or a duration before now; "" is now.
func parseTime(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return now, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return time.Time{}, err
	}
	return now.Add(-d), nil
}
