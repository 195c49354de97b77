package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/engine/guardrail"
	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/recommend"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/rules/distribution"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/rules"
)

type fakeEval struct{}

func (fakeEval) Scores() []loadscore.Score {
	return []loadscore.Score{{Key: signals.Key{Service: "checkout"}, Value: 0.8, Known: true,
		Raw: loadscore.Raw{Score: 0.8, Known: true, Terms: []loadscore.Contribution{{Term: loadscore.Latency, Known: true, Contribution: 0.8}}}}}
}

func (fakeEval) Recommendations() []recommend.Recommendation {
	return []recommend.Recommendation{{Service: "checkout", Reason: "lower the ceiling"}}
}

func (fakeEval) LastTick() time.Time { return time.Unix(100, 0) }

type fakeLedger struct{}

func (fakeLedger) Instances(_ context.Context, service string) ([]distribution.Instance, error) {
	return []distribution.Instance{{Service: "checkout", Instance: "a", State: distribution.StateSynced}}, nil
}

type fakeGuard struct{}

func (fakeGuard) Decisions() []guardrail.Decision {
	return []guardrail.Decision{{Service: "checkout", Version: 2, Verdict: guardrail.Regression}}
}

func TestHandler(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Propose(ctx, versioning.Proposal{Ruleset: &rules.Ruleset{Service: "checkout"},
		Author: versioning.Actor{Name: "alice", Roles: []versioning.Role{versioning.RoleOperator}}, Reason: "start"}); err != nil {
		t.Fatal(err)
	}
	rec := events.NewRecorder(10)
	rec.Emit(ctx, events.Event{Kind: events.AutoRollback, Service: "checkout", Message: "rolled back"})
	ready := errors.New("warming up")
	srv := httptest.NewServer(Handler(Options{Evaluations: fakeEval{}, Versions: st, Ledger: fakeLedger{}, Guardrails: fakeGuard{},
		Events: rec, Gatherer: prometheus.NewRegistry(), Ready: func() error { return ready }}))
	defer srv.Close()
	tests := []struct {
		path string
		code int
		want string
	}{
		{"/healthz", 200, "ok"},
		{"/readyz", 503, "warming up"},
		{"/metrics", 200, ""},
		{"/engine/api/v1/services", 200, `"active_version":0,"pending":1,"instances":{"SYNCED":1}`},
		{"/engine/api/v1/services/checkout", 200, `"term":"latency"`},
		{"/engine/api/v1/services/unknown", 404, "not found"},
		{"/engine/api/v1/services/bad%20name", 400, "error"},
		{"/engine/api/v1/services/checkout/versions", 200, `"state":"proposed"`},
		{"/engine/api/v1/services/checkout/versions?limit=0", 400, "limit"},
		{"/engine/api/v1/recommendations", 200, "lower the ceiling"},
		{"/engine/api/v1/ledger?service=checkout", 200, `"instance":"a"`},
		{"/engine/api/v1/guardrails", 200, `"verdict":"regression"`},
		{"/engine/api/v1/events?kind=auto_rollback", 200, "rolled back"},
	}
	for _, tt := range tests {
		resp, err := http.Get(srv.URL + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.code || !strings.Contains(string(body), tt.want) {
			t.Errorf("GET %s: %d %s; want %d containing %s", tt.path, resp.StatusCode, body, tt.code, tt.want)
		}
		if strings.HasPrefix(tt.path, Prefix) && !json.Valid(body) {
			t.Errorf("GET %s: not JSON: %s", tt.path, body)
		}
	}
	ready = nil
	if resp, err := http.Get(srv.URL + "/readyz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("readyz when ready: %v %v", resp, err)
	}
}

// A ledger without instances answers an empty list, not null: the SQL and
// memory ledger stores return a nil slice when nothing matches.
func TestLedgerWithoutInstancesIsAnEmptyList(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	led, err := distribution.NewLedger(distribution.LedgerOptions{Store: distribution.NewMemoryStore()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(Options{Evaluations: fakeEval{}, Versions: st, Ledger: led}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + Prefix + "/ledger?service=checkout")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != `{"instances":[]}` {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

type failingLedger struct{}

func (failingLedger) Instances(context.Context, string) ([]distribution.Instance, error) {
	return nil, errors.New("connection refused")
}

// TestServicesWithoutTheLedgerSayInstancesAreUnknown: a delivery ledger
// that cannot be read no longer fails the whole list (the UI lost every
// score with it), and no ledger is not "no instances": instances is null
// and, when the read failed, the list's problems say why.
func TestServicesWithoutTheLedgerSayInstancesAreUnknown(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Propose(ctx, versioning.Proposal{Ruleset: &rules.Ruleset{Service: "checkout"},
		Author: versioning.Actor{Name: "alice", Roles: []versioning.Role{versioning.RoleOperator}}, Reason: "start"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		ledger  Ledger
		problem string
	}{
		{"no ledger", nil, ""},
		{"ledger failing", failingLedger{}, "delivery ledger: connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(Handler(Options{Evaluations: fakeEval{}, Versions: st, Ledger: tc.ledger}))
			defer srv.Close()
			resp, err := http.Get(srv.URL + "/engine/api/v1/services")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var doc struct {
				Services []struct {
					Service   string          `json:"service"`
					Instances *map[string]int `json:"instances"`
					Score     json.RawMessage `json:"score"`
				} `json:"services"`
				Problems []string `json:"problems"`
			}
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
				t.Fatal(err)
			}
			if len(doc.Services) == 0 {
				t.Fatal("no services")
			}
			for _, sv := range doc.Services {
				if sv.Instances != nil {
					t.Errorf("%s: instances %v, want null", sv.Service, *sv.Instances)
				}
			}
			if tc.problem == "" && doc.Problems != nil || tc.problem != "" && (len(doc.Problems) != 1 || doc.Problems[0] != tc.problem) {
				t.Errorf("problems %q, want %q", doc.Problems, tc.problem)
			}
		})
	}
}

type unpublishedLedger struct{}

func (unpublishedLedger) Instances(_ context.Context, service string) ([]distribution.Instance, error) {
	return []distribution.Instance{
		{Service: "orders", Instance: "a", State: distribution.StateUnpublished},
		{Service: "orders", Instance: "b", State: distribution.StateUnpublished, Running: 3},
	}, nil
}

// TestInstancesWithNoVersionPublishedAreUnpublished: the services list
// counts the instances of a service no rule version was published for
// under "UNPUBLISHED", never "SYNCED", and the ledger lists them with
// state "UNPUBLISHED", target 0 and the version they say they run.
func TestInstancesWithNoVersionPublishedAreUnpublished(t *testing.T) {
	st, err := sqlite.Open(context.Background(), sqlite.Options{Path: ":memory:"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv := httptest.NewServer(Handler(Options{Evaluations: fakeEval{}, Versions: st, Ledger: unpublishedLedger{}}))
	defer srv.Close()
	var list struct {
		Services []struct {
			Service   string         `json:"service"`
			Instances map[string]int `json:"instances"`
		} `json:"services"`
	}
	if code := getJSON(t, srv.URL+"/engine/api/v1/services", &list); code != 200 {
		t.Fatalf("services: %d", code)
	}
	var found bool
	for _, s := range list.Services {
		if s.Service == "orders" {
			found = true
			if len(s.Instances) != 1 || s.Instances["UNPUBLISHED"] != 2 {
				t.Fatalf("orders instances %v, want {UNPUBLISHED: 2}", s.Instances)
			}
		}
	}
	if !found {
		t.Fatalf("services %+v: orders missing", list.Services)
	}
	var led struct {
		Instances []struct {
			State   string `json:"state"`
			Running int64  `json:"running"`
			Target  int64  `json:"target"`
		} `json:"instances"`
	}
	if code := getJSON(t, srv.URL+"/engine/api/v1/ledger?service=orders", &led); code != 200 {
		t.Fatalf("ledger: %d", code)
	}
	if len(led.Instances) != 2 || led.Instances[0].State != "UNPUBLISHED" || led.Instances[0].Target != 0 ||
		led.Instances[1].Running != 3 {
		t.Fatalf("ledger %+v", led.Instances)
	}
}
