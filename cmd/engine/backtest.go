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

	"governor.dev/governor/engine/app"
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
	prom := fs.String("prometheus", "", "Prometheus query API holding the recorded metrics (required: this flag, GOVERNOR_PROMETHEUS_URL or metrics.prometheus_url)")
	rulesFile := fs.String("rules", "", "JSON ruleset in force at the start (required)")
	cfgFile := fs.String("config", "", "engine configuration for the load score, recommender and bands (also GOVERNOR_CONFIG); GOVERNOR_* variables override it as for engine run")
	asJSON := fs.Bool("json", false, "print one JSON object per proposal (the summary goes to stderr)")
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
	switch {
	case *from == "":
		errs = append(errs, errors.New("-from is required"))
	case err1 != nil:
		errs = append(errs, fmt.Errorf("-from: %q: want RFC 3339 or a duration before now (%v)", *from, err1))
	}
	if err2 != nil {
		errs = append(errs, fmt.Errorf("-to: %q: want RFC 3339 or a duration before now (%v)", *to, err2))
	}
	if *from != "" && err1 == nil && err2 == nil && !t1.Before(t2) {
		errs = append(errs, fmt.Errorf("-from %s is not before -to %s", t1.Format(time.RFC3339), t2.Format(time.RFC3339)))
	}
	if *step < 0 {
		errs = append(errs, fmt.Errorf("-step %s must not be negative", *step))
	}
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q (flags go before them)", fs.Args()))
	}
	if *rulesFile == "" {
		errs = append(errs, errors.New("-rules is required"))
	}
	cfg, err := backtestConfig(*cfgFile, os.Getenv)
	if err != nil {
		errs = append(errs, err)
	}
	if *prom == "" {
		*prom = cfg.Metrics.PrometheusURL
	}
	if *prom == "" {
		errs = append(errs, errors.New("-prometheus is required (the embedded store keeps no history across runs)"))
	}
	if *step == 0 {
		*step = cfg.Interval
	}
	if n := backtest.Steps(t1, t2, *step); *from != "" && err1 == nil && err2 == nil && n > backtest.MaxSteps {
		errs = append(errs, fmt.Errorf("-step %s from -from %s to -to %s gives %d evaluations, more than the %d allowed: raise -step or shorten the range",
			*step, t1.Format(time.RFC3339), t2.Format(time.RFC3339), n, backtest.MaxSteps))
	}
	if len(errs) > 0 {
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
	o := backtestOptions(cfg, *service)
	o.Source, o.From, o.To, o.Step, o.Ruleset = src, t1, t2, *step, rs
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
		if errors.Is(err, backtest.ErrInvalidOption) {
			return 2
		}
		return 1
	}
	// With -json the summary goes to stderr: stdout holds only proposals.
	w := stdout
	if *asJSON {
		w = stderr
	}
	cfgName := *cfgFile
	if cfgName == "" {
		cfgName = os.Getenv("GOVERNOR_CONFIG")
	}
	if cfgName == "" {
		cfgName = "defaults"
	}
	fmt.Fprintf(w, "replayed %s from %s to %s every %s against %s; configuration: %s, with GOVERNOR_* applied\n",
		*service, t1.UTC().Format(time.RFC3339), t2.UTC().Format(time.RFC3339), *step, *prom, cfgName)
	fmt.Fprintf(w, "%d steps, %d known load scores (max %.2f), %d inconclusive; %d proposals, %d inside the band\n",
		sum.Steps, sum.KnownScores, sum.MaxScore, sum.Inconclusive, sum.Proposals, sum.AutoApplied)
	for _, warning := range backtestWarnings(sum, *service, t1, t2) {
		fmt.Fprintln(w, "warning:", warning)
	}
	return 0
}

// backtestWarnings says what in the summary makes the replay less than it
// looks: no data at all, queries that failed, or answers that may lack data
// (on which the replay, as the live engine, proposes nothing).
func backtestWarnings(sum backtest.Summary, service string, t1, t2 time.Time) []string {
	var out []string
	if sum.Steps > 0 && sum.StepsWithData == 0 {
		out = append(out, fmt.Sprintf("no data for service %q between %s and %s: nothing was replayed (check the service name and the source's retention)",
			service, t1.UTC().Format(time.RFC3339), t2.UTC().Format(time.RFC3339)))
	}
	if sum.FailedReads > 0 {
		out = append(out, fmt.Sprintf("queries failed at %d of %d steps, whose signals read as unknown; first at %s",
			sum.FailedReads, sum.Steps, sum.FirstFailure))
	}
	if sum.PartialSteps > 0 {
		out = append(out, fmt.Sprintf("answers may lack data at %d of %d steps, which proposed nothing (as the live engine); first at %s",
			sum.PartialSteps, sum.Steps, sum.FirstPartial))
	}
	return out
}

// parseTime reads RFC 3339 or a duration before now; "" is now. A negative
// duration (a time after now) is refused.
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
	if d < 0 {
		return time.Time{}, fmt.Errorf("duration %s is negative: that is after now", d)
	}
	return now.Add(-d), nil
}

// backtestConfig is the engine configuration exactly as `engine run` loads
// it (config.Load without flags): the defaults (dev mode's with
// GOVERNOR_DEV), the file (file, else GOVERNOR_CONFIG), then the GOVERNOR_*
// environment variables, validated as a whole. So the same settings give
// the replay the recommender, load score, band and interval of the live
// engine.
func backtestConfig(file string, getenv func(string) string) (config.Config, error) {
	var args []string
	if file != "" {
		args = []string{"-config", file}
	}
	cfg, _, err := config.Load(args, getenv, io.Discard)
	return cfg, err
}

// backtestOptions are the replay's options from the engine configuration:
// the load score, the recommender and the service's band as the live engine
// builds them.
func backtestOptions(cfg config.Config, service string) backtest.Options {
	o := backtest.Options{Service: service,
		Reader:    signals.ReaderOptions{Window: cfg.Metrics.Window, MaxAge: -1},
		LoadScore: loadscore.Options{Targets: loadscore.Targets{Latency: cfg.Score.Latency}, HalfLife: cfg.Score.HalfLife},
		Recommend: app.RecommendOptions(cfg.Recommend),
	}
	if len(cfg.Score.Weights) > 0 {
		o.LoadScore.Weights = loadscore.Weights{}
		for t, w := range cfg.Score.Weights {
			o.LoadScore.Weights[loadscore.Term(t)] = w
		}
	}
	b, ok := cfg.Bands.Services[service]
	if !ok {
		b = cfg.Bands.Default
	}
	o.Band = recommend.Band{Manual: b.Manual, MaxChangePerHour: b.MaxChangePerHour, Floor: b.Floor, Ceiling: b.Ceiling}
	return o
}
