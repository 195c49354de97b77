package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/bench/limiters"
	"governor.dev/governor/bench/report"
	"governor.dev/governor/bench/scenario"
	"governor.dev/governor/bench/sim"
	"governor.dev/governor/sdk/rules"
)

const tiny = `{"name":"tiny","duration":"1s","arrival":{"unit":"rps","base":40},
 "cost":{"cpu":{"dist":"constant","mean":"200us"},"wait":{"dist":"constant","mean":"2ms"}},
 "downstream":{"concurrency":4},
 "client":{"deadline":"2s","max_attempts":2},
 "classes":{"critical":0.5,"batch":0.5}}`

// TestServerAndLoadGenerator runs the live server and load generator in
// this process (not as child processes) on a loopback port, for one second.
func TestServerAndLoadGenerator(t *testing.T) {
	s, err := scenario.Decode([]byte(tiny))
	if err != nil {
		t.Fatal(err)
	}
	lim, err := limiters.New("governor", limiters.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- newServer(s, lim, 0).serve(ctx, func(a string) error { addr <- a; return nil })
	}()
	base := "http://" + <-addr
	c, err := calibrate(ctx, s, base, 300*time.Millisecond)
	if err != nil || c <= 0 {
		t.Fatalf("calibrate = %v, %v", c, err)
	}
	lg := &loadgen{s: s, base: base, client: newClient(), budget: scenario.NewBudget(nil),
		reqs: scenario.NewSource(s, 0).Requests(c)}
	atts, err := lg.run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(atts) < 20 {
		t.Fatalf("got %d attempts, want about 40", len(atts))
	}
	r := report.Measure("governor", s, c, atts)
	if r.GoodputRatio < 0.9 || r.ShedRatio > 0 {
		t.Fatalf("light load not served: %+v", r)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestRunSim(t *testing.T) {
	s, _ := scenario.Decode([]byte(tiny))
	run, err := RunSim(s, []string{"governor", "none"}, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if run.Mode != ModeSim || run.CapacityRPS != 5000 || len(run.Results) != 2 {
		t.Fatalf("unexpected run %+v", run)
	}
}

// TestLimitShrink: the limit samples are rounded, so a halving of an odd
// sample is published as its half rounded up (37.1 halved is 18.55, published
// as 19), and counts as the halving.
func TestLimitShrink(t *testing.T) {
	s := &scenario.Scenario{Events: []scenario.Event{{From: rules.Duration(500 * time.Millisecond)}}}
	for _, c := range []struct {
		name   string
		limits []int
		want   float64
	}{
		{"odd halved", []int{37, 37, 37, 37, 37, 37, 19, 19, 14}, 0.2},
		{"even halved", []int{64, 64, 64, 64, 64, 64, 32, 32}, 0.2},
		{"not half", []int{37, 37, 37, 37, 37, 37, 20, 20, 14}, 0.4},
		{"never", []int{51, 51, 51, 51, 51, 40, 30}, -1},
	} {
		if got := limitShrink(s, c.limits); got != c.want {
			t.Errorf("%s: limitShrink = %v, want %v", c.name, got, c.want)
		}
	}
}

// The server child builds the governor limiters with the ruleset its
// configuration carries (the -ruleset flag of cmd/overload), and refuses an
// invalid one naming the field.
func TestServerChildUsesTheRuleset(t *testing.T) {
	const fixed = `{"service":"bench","routes":[{"name":"default","match":{"path_prefix":"/"},
	 "concurrency":{"algorithm":"fixed","initial":3,"min":1,"max":3},"shedding":{},"queue":{}}]}`
	s, err := scenario.Decode([]byte(tiny))
	if err != nil {
		t.Fatal(err)
	}
	cfg := func(rs string) childConfig {
		return childConfig{Scenario: json.RawMessage(tiny), Limiter: "governor", Ruleset: json.RawMessage(rs)}
	}
	bad, _ := json.Marshal(cfg(strings.Replace(fixed, `"max":3`, `"max":0`, 1)))
	err = Child(context.Background(), "server", bytes.NewReader(bad), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "routes[0].concurrency.max") {
		t.Fatalf("invalid ruleset: got %v, want an error naming routes[0].concurrency.max", err)
	}
	o, err := serverOptions(s, cfg(fixed))
	if err != nil {
		t.Fatal(err)
	}
	lim, err := limiters.New("governor", o)
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	if l := lim.(interface{ Limit() int }).Limit(); l != 3 {
		t.Fatalf("limit %d, want the ruleset's fixed 3", l)
	}
	o, err = serverOptions(s, childConfig{Scenario: json.RawMessage(tiny), Limiter: "governor"})
	if err != nil || o.Ruleset != nil {
		t.Fatalf("without a ruleset: %+v, %v; want the default ruleset (nil)", o, err)
	}
}
