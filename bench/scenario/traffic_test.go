package scenario

import (
	"testing"
	"time"
)

func TestBudget(t *testing.T) {
	tests := []struct {
		name    string
		cfg     *RetryBudget
		firsts  int
		want    int // retries allowed out of 100 asked
		spacing time.Duration
	}{
		{"no budget allows all", nil, 100, 100, 10 * time.Millisecond},
		{"10% of first attempts", &RetryBudget{Ratio: 0.1}, 100, 10, 10 * time.Millisecond},
		{"plus a floor per second", &RetryBudget{Ratio: 0.1, MinPerSecond: 1}, 100, 20, 10 * time.Millisecond},
		{"zero ratio, zero floor", &RetryBudget{}, 100, 0, 10 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBudget(tt.cfg)
			at := time.Duration(0)
			for range tt.firsts {
				b.First(at)
				at += tt.spacing
			}
			got := 0
			for range 100 {
				if b.Retry(at) {
					got++
				}
			}
			if got != tt.want {
				t.Fatalf("allowed %d retries, want %d", got, tt.want)
			}
		})
	}
}

func TestBudgetForgetsAfterTenSeconds(t *testing.T) {
	b := NewBudget(&RetryBudget{Ratio: 0.5})
	for range 10 {
		b.First(0)
	}
	for range 5 {
		if !b.Retry(0) {
			t.Fatal("retry within budget refused")
		}
	}
	if b.Retry(0) {
		t.Fatal("retry beyond budget allowed")
	}
	// Eleven seconds later the window holds nothing: no first attempts, no budget.
	if b.Retry(11 * time.Second) {
		t.Fatal("retry allowed with no first attempts in the window")
	}
	b.First(11 * time.Second)
	b.First(11 * time.Second)
	if !b.Retry(11 * time.Second) {
		t.Fatal("old retries still counted after the window moved on")
	}
}

func TestRequestsShareDraws(t *testing.T) {
	s, err := Load("../scenarios/latency-step.json")
	if err != nil {
		t.Fatal(err)
	}
	a := NewSource(s, 0).Requests(100)
	b := NewSource(s, 0).Requests(100)
	if len(a) == 0 || len(a) != len(b) {
		t.Fatalf("request counts %d and %d", len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("request %d differs: %+v vs %+v", i, a[i], b[i])
		}
		if a[i].Wait <= 0 || a[i].CPU <= 0 {
			t.Fatalf("request %d lacks costs: %+v", i, a[i])
		}
	}
}
