package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"governor.dev/governor/rules/distribution"
	"governor.dev/governor/rules/versioning/sqlite"
)

type fakeRelay []distribution.Undeliverable

func (f fakeRelay) Undeliverable(_ context.Context, service string) ([]distribution.Undeliverable, error) {
	var out []distribution.Undeliverable
	for _, u := range f {
		if service == "" || u.Service == service {
			out = append(out, u)
		}
	}
	return out, nil
}

// The service detail carries the p99 levels the engine alerts on and the
// versions the relay could not deliver; /undeliverable lists them all.
func TestServiceLevelsAndUndeliverable(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	relay := fakeRelay{{OutboxID: 7, Service: "checkout", Version: 12, Reason: "too_large", Size: 1_200_000, Limit: 1 << 20},
		{OutboxID: 9, Service: "payments", Version: 3, Reason: "too_large", Size: 2_000_000, Limit: 1 << 20}}
	levels := func(svc string) (LatencyLevels, bool) {
		if svc == "checkout" {
			return LatencyLevels{Warn: 0.25, Critical: 0.5, Source: "learned"}, true
		}
		return LatencyLevels{}, false
	}
	srv := httptest.NewServer(Handler(Options{Evaluations: fakeEval{}, Versions: st, Levels: levels, Relay: relay}))
	defer srv.Close()
	get := func(path string, v any) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	// The score's values marshal to JSON but do not decode from it.
	type detail struct {
		LatencyLevels *LatencyLevels               `json:"latency_levels"`
		Undeliverable []distribution.Undeliverable `json:"undeliverable"`
	}
	var sv detail
	get(Prefix+"/services/checkout", &sv)
	if sv.LatencyLevels == nil || *sv.LatencyLevels != (LatencyLevels{Warn: 0.25, Critical: 0.5, Source: "learned"}) {
		t.Errorf("checkout latency_levels = %+v", sv.LatencyLevels)
	}
	if len(sv.Undeliverable) != 1 || sv.Undeliverable[0].Version != 12 || sv.Undeliverable[0].Limit != 1<<20 {
		t.Errorf("checkout undeliverable = %+v", sv.Undeliverable)
	}
	// payments is known only to the relay: it is listed, without levels.
	var pay detail
	get(Prefix+"/services/payments", &pay)
	if pay.LatencyLevels != nil || len(pay.Undeliverable) != 1 || pay.Undeliverable[0].Version != 3 {
		t.Errorf("payments = %+v", pay)
	}
	var all struct {
		Undeliverable []distribution.Undeliverable `json:"undeliverable"`
	}
	get(Prefix+"/undeliverable", &all)
	if len(all.Undeliverable) != 2 {
		t.Errorf("undeliverable = %+v", all.Undeliverable)
	}
	// Without a relay the list is empty, not null.
	srv2 := httptest.NewServer(Handler(Options{Evaluations: fakeEval{}, Versions: st}))
	defer srv2.Close()
	resp, err := http.Get(srv2.URL + Prefix + "/undeliverable")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw map[string]json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil || string(raw["undeliverable"]) != "[]" {
		t.Errorf("without a relay: %s %v", raw["undeliverable"], err)
	}
}
