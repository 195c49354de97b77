package main

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
)

func TestSmallRunPrintsTheResultWithoutMisses(t *testing.T) {
	var out bytes.Buffer
	code := run([]string{"-watchers", "20", "-versions", "3", "-interval", "0s", "-json"}, &out, io.Discard)
	if code != 0 {
		t.Fatalf("exit code %d, output %s", code, out.String())
	}
	var res Result
	dec := json.NewDecoder(&out)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		t.Fatal(err)
	}
	if res.Watchers != 20 || res.Versions != 3 || res.Missed != 0 {
		t.Fatalf("result %+v", res)
	}
	if !(res.P50MS > 0 && res.P50MS <= res.P99MS && res.P99MS <= res.MaxMS) {
		t.Fatalf("quantiles out of order: %+v", res)
	}
}

func TestBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"unknown server", []string{"-server", "cloud", "-watchers", "1", "-versions", "1"}},
		{"no watchers", []string{"-watchers", "0"}},
		{"unknown flag", []string{"-nope"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if code := run(tt.args, io.Discard, io.Discard); code == 0 {
				t.Fatal("exit code 0")
			}
		})
	}
}

func TestQuantile(t *testing.T) {
	s := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	tests := []struct {
		q    float64
		want float64
	}{{0.5, 5}, {0.99, 10}, {0.1, 1}, {1, 10}}
	for _, tt := range tests {
		if got := quantile(s, tt.q); got != tt.want {
			t.Errorf("quantile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if quantile(nil, 0.5) != 0 {
		t.Error("quantile of nothing")
	}
}
