package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
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
	tests := []struct {
		args []string
		want string
	}{
		{nil, "-scenario is required"},
		{[]string{"-scenario", "nope.json"}, "no such file"},
		{[]string{"-scenario", "../../scenarios/low-traffic.json", "-mode", "fast"}, "-mode must be sim or live"},
		{[]string{"-scenario", "../../scenarios/low-traffic.json", "-limiters", "bogus"}, "unknown policy"},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		if code := run(tt.args, &out, &errb); code == 0 || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("run(%v) = %d, stderr %q, want failure mentioning %q", tt.args, code, errb.String(), tt.want)
		}
	}
}
