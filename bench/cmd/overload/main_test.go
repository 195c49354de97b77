package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"governor.dev/governor/sdk/rules"
)

func TestSimJSON(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"-scenario", "../../scenarios/low-traffic.json", "-mode", "sim", "-json", "-limiters", "governor,none"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var got struct {
		Scenario    string  `json:"scenario"`
		Mode        string  `json:"mode"`
		CapacityRPS float64 `json:"capacity_rps"`
		Results     []struct {
			Limiter      string             `json:"limiter"`
			GoodputRatio float64            `json:"goodput_ratio"`
			ClassSuccess map[string]float64 `json:"class_success"`
		} `json:"results"`
	}
	dec := json.NewDecoder(&out)
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("output is not the result object: %v", err)
	}
	if got.Scenario != "low-traffic" || got.Mode != "sim" || got.CapacityRPS != 250 || len(got.Results) != 2 {
		t.Fatalf("unexpected output %+v", got)
	}
	if got.Results[0].Limiter != "governor" || len(got.Results[0].ClassSuccess) != 4 {
		t.Fatalf("unexpected first result %+v", got.Results[0])
	}
}

func TestBadArguments(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"service":"bench","routes":[{"name":"default","match":{"path_prefix":"/"},"concurrency":{"algorithm":"fixed"}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	api := filepath.Join(t.TempDir(), "api.json")
	if err := os.WriteFile(api, []byte(`{"service":"bench","routes":[{"name":"api","match":{"path_prefix":"/api"},"concurrency":{"algorithm":"fixed","initial":1,"min":1,"max":1}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		want string
	}{
		{nil, "-scenario is required"},
		{[]string{"-scenario", "nope.json"}, "no such file"},
		{[]string{"-scenario", "../../scenarios/low-traffic.json", "-mode", "fast"}, "-mode must be sim or live"},
		{[]string{"-scenario", "../../scenarios/low-traffic.json", "-limiters", "bogus"}, "unknown policy"},
		{[]string{"-scenario", "../../scenarios/low-traffic.json", "-ruleset", "../../rulesets/fixed-1-queue.json"}, "-ruleset needs -mode live"},
		{[]string{"-scenario", "../../scenarios/low-traffic.json", "-mode", "live", "-ruleset", bad}, "routes[0].concurrency.max: is required"},
		{[]string{"-scenario", "../../scenarios/low-traffic.json", "-mode", "live", "-ruleset", "nope.json"}, "no such file"},
		{[]string{"-scenario", "../../scenarios/low-traffic.json", "-mode", "live", "-ruleset", api}, "routes: no route matches GET /"},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		if code := run(tt.args, &out, &errb); code == 0 || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("run(%v) = %d, stderr %q, want failure mentioning %q", tt.args, code, errb.String(), tt.want)
		}
	}
}

// Every ruleset shipped in rulesets/ is one the lab accepts.
func TestShippedRulesetsDecode(t *testing.T) {
	files, err := filepath.Glob("../../rulesets/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no rulesets found (%v)", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rules.Decode(b); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
