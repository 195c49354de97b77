package demo

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"governor.dev/governor/internal/natsembed"
)

func TestPhase(t *testing.T) {
	period := 90 * time.Second
	tests := []struct {
		svc             Service
		at              time.Duration
		rate, work, cap float64
	}{
		{Service{Incident: Spike, Factor: 2.5}, 10 * time.Second, 2.5, 1, 1},
		{Service{Incident: Spike, Factor: 2.5}, 40 * time.Second, 1, 1, 1},
		{Service{Incident: SlowDownstream, Factor: 3, Offset: 20 * time.Second}, 10 * time.Second, 1, 1, 1},
		{Service{Incident: SlowDownstream, Factor: 3, Offset: 20 * time.Second}, 25 * time.Second, 1, 3, 1},
		{Service{Incident: CapacityDrop, Factor: 2, Offset: 40 * time.Second}, 69 * time.Second, 1, 1, 2},
		{Service{Incident: CapacityDrop, Factor: 2, Offset: 40 * time.Second}, 71 * time.Second, 1, 1, 1},
		{Service{Incident: Spike, Factor: 2}, 95 * time.Second, 2, 1, 1},
	}
	for _, tt := range tests {
		r, w, c := tt.svc.phase(tt.at, period)
		if r != tt.rate || w != tt.work || c != tt.cap {
			t.Errorf("%s at %s: %v %v %v, want %v %v %v", tt.svc.Incident, tt.at, r, w, c, tt.rate, tt.work, tt.cap)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, s := range DefaultServices() {
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
		if err := s.Ruleset(2).Validate(); err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
	}
	bad := []Service{{}, {Name: "a"}, {Name: "a", Capacity: 1}, {Name: "a", Capacity: 1, Work: 1, Rate: -1},
		{Name: "a", Capacity: 1, Work: 1, Factor: 0.5}}
	for _, s := range bad {
		if err := s.Validate(); err == nil {
			t.Errorf("%+v accepted", s)
		}
	}
	if _, err := New(Options{}); err == nil {
		t.Fatal("fleet without a connection accepted")
	}
}

// TestFleetServes starts a small fleet on an embedded NATS server: each
// instance serves the simulated backend under its rules and exposes the SDK
// metrics, and the generator's traffic reaches it.
func TestFleetServes(t *testing.T) {
	srv, err := natsembed.Start(natsembed.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	f, err := New(Options{Conn: nc, Instances: 2, Traffic: true,
		Services: []Service{{Name: "checkout", Capacity: 4, Work: 5 * time.Millisecond, Rate: 50, Factor: 1.5}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = f.Run(ctx) }()
	eps := f.Endpoints()
	if len(eps) != 2 || eps[0].Instance != "checkout-1" {
		t.Fatalf("endpoints %+v", eps)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(eps[0].URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), `governor_sdk_requests_total{class="core",outcome="admitted",route="api",service="checkout"}`) &&
			!strings.Contains(string(body), `outcome="admitted",route="api",service="checkout"} 0`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no admitted traffic in the metrics:\n%s", body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	resp, err := http.Get(eps[1].URL + "/api/work")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status %s", resp.Status)
	}
	if inc, active := f.Phase("checkout"); inc != Spike || !active {
		t.Fatalf("phase %s %v", inc, active)
	}
	cancel()
	<-done
}
