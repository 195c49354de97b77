package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestTickAndShutdownTimeoutsAreReadFromTheFile(t *testing.T) {
	c, err := Decode(strings.NewReader("interval: 20s\ntick_timeout: 15s\nshutdown_timeout: 50s\n"), Default())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.TickTimeout != 15*time.Second || c.EvalTimeout() != 15*time.Second || c.ShutdownTimeout != 50*time.Second {
		t.Fatalf("tick_timeout %s (in force %s), shutdown_timeout %s; want 15s, 15s, 50s", c.TickTimeout, c.EvalTimeout(), c.ShutdownTimeout)
	}
}

func TestTickTimeoutDefaultsToNineTenthsOfTheInterval(t *testing.T) {
	c := Default()
	c.Interval = 30 * time.Second
	if got := c.EvalTimeout(); got != 27*time.Second {
		t.Fatalf("tick timeout in force %s with interval 30s and tick_timeout unset, want 27s", got)
	}
	if d := Default().ShutdownTimeout; d != 25*time.Second {
		t.Fatalf("default shutdown_timeout %s, want 25s", d)
	}
}

func TestBadTimeoutsAreRefusedByName(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"negative tick timeout", "tick_timeout: -1s\n", "tick_timeout: must not be negative"},
		{"tiny tick timeout", "tick_timeout: 1ms\n", "tick_timeout: must be at least 10ms"},
		{"tick timeout above the interval", "interval: 10s\ntick_timeout: 11s\n", "tick_timeout: 11s exceeds interval 10s"},
		{"zero shutdown timeout", "shutdown_timeout: 0s\n", "shutdown_timeout: must be a positive duration"},
		{"negative shutdown timeout", "shutdown_timeout: -5s\n", "shutdown_timeout: must be a positive duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Decode(strings.NewReader(tt.yaml), Default())
			if err != nil {
				t.Fatal(err)
			}
			err = c.Validate()
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}
