package limiters

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/sdk/limit"
	"governor.dev/governor/sdk/rules"
)

func TestEveryLimiterAdmitsWhenIdle(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			l, err := New(name, Options{CapacityRPS: 1000, StaticLimit: 8})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for i := range 4 {
				tk, err := l.Acquire(context.Background(), Request{Class: rules.Classes[i%4]})
				if err != nil {
					t.Fatalf("idle limiter rejected request %d: %v", i, err)
				}
				l.Release(tk, time.Millisecond, i == 3)
			}
		})
	}
}

func TestStaticRejectsAboveLimit(t *testing.T) {
	l, _ := New("static", Options{StaticLimit: 2})
	var held []Ticket
	for range 2 {
		tk, err := l.Acquire(context.Background(), Request{})
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, tk)
	}
	if _, err := l.Acquire(context.Background(), Request{}); !errors.Is(err, ErrRejected) {
		t.Fatalf("third acquire: got %v, want ErrRejected", err)
	}
	l.Release(held[0], time.Millisecond, false)
	if _, err := l.Acquire(context.Background(), Request{}); err != nil {
		t.Fatalf("after release: %v", err)
	}
}

func TestXRateRejectsBeyondBurst(t *testing.T) {
	l, _ := New("xrate", Options{CapacityRPS: 10}) // burst 1
	if _, err := l.Acquire(context.Background(), Request{}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(context.Background(), Request{}); !errors.Is(err, ErrRejected) {
		t.Fatalf("second immediate acquire: got %v, want ErrRejected", err)
	}
}

func TestParseList(t *testing.T) {
	tests := []struct {
		in      string
		want    int
		wantErr bool
	}{
		{"", len(Names()), false},
		{"none,static", 2, false},
		{" none , none ,static", 2, false},
		{"none,bogus", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseList(tt.in)
		if (err != nil) != tt.wantErr {
			t.Fatalf("ParseList(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
		}
		if err != nil {
			if !errors.Is(err, ErrUnknown) {
				t.Fatalf("ParseList(%q) error %v does not wrap ErrUnknown", tt.in, err)
			}
			continue
		}
		if len(got) != tt.want {
			t.Fatalf("ParseList(%q) = %v, want %d names", tt.in, got, tt.want)
		}
	}
}

func TestGovernorLimitStateIsTheRouteLimiters(t *testing.T) {
	l, err := New("governor", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ls, ok := l.(interface {
		LimitState() (limit.Snapshot, bool)
		Limit() int
	})
	if !ok {
		t.Fatal("governor does not expose LimitState")
	}
	s, ok := ls.LimitState()
	if !ok {
		t.Fatal("LimitState: no limiter")
	}
	if s.Limit != ls.Limit() || s.Limit < 1 {
		t.Fatalf("LimitState().Limit = %d, Limit() = %d", s.Limit, ls.Limit())
	}
}

// A ruleset the laboratory's requests (GET /) would pass through without a
// concurrency limit is refused naming routes; the limit reported is the
// one of the route the requests take, whatever its name.
func TestCheckRuleset(t *testing.T) {
	fixed := func(n int) *rules.Concurrency {
		return &rules.Concurrency{Algorithm: rules.AlgorithmFixed, Initial: n, Min: 1, Max: n}
	}
	for name, tt := range map[string]struct {
		routes []rules.Route
		want   string
	}{
		"other prefix":   {[]rules.Route{{Name: "api", Match: rules.Match{PathPrefix: "/api"}, Concurrency: fixed(1)}}, "routes: no route matches GET /"},
		"other method":   {[]rules.Route{{Name: "w", Match: rules.Match{PathPrefix: "/", Methods: []string{"POST"}}, Concurrency: fixed(1)}}, "routes: no route matches GET /"},
		"no concurrency": {[]rules.Route{{Name: "all", Match: rules.Match{PathPrefix: "/"}}}, `routes: route "all", which GET / takes, has no concurrency limit`},
		"GET first": {[]rules.Route{{Name: "all", Match: rules.Match{PathPrefix: "/"}, Concurrency: fixed(5)},
			{Name: "reads", Match: rules.Match{PathPrefix: "/", Methods: []string{"GET"}}, Concurrency: fixed(3)}}, ""},
	} {
		rs := &rules.Ruleset{Service: "bench", Routes: tt.routes}
		route, err := CheckRuleset(rs)
		if tt.want != "" {
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s: got %q, %v; want an error containing %q", name, route, err, tt.want)
			}
			continue
		}
		if err != nil || route != "reads" {
			t.Fatalf("%s: got %q, %v; want reads", name, route, err)
		}
		l, err := New("governor", Options{Ruleset: rs})
		if err != nil {
			t.Fatal(err)
		}
		if got := l.(interface{ Limit() int }).Limit(); got != 3 {
			t.Errorf("%s: limit %d, want the reads route's 3", name, got)
		}
		l.Close()
	}
}
