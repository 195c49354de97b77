package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"governor.dev/governor/internal/natsembed"
	"governor.dev/governor/internal/testenv"
	"governor.dev/governor/rules/distribution"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/postgres"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/sdk/watch"
)

type failingRelay struct{}

func (failingRelay) Undeliverable(context.Context, string) ([]distribution.Undeliverable, error) {
	return nil, errors.New("store down")
}

// The endpoint filters by service, refuses a bad service name with 400 and
// answers 500 when the store cannot list.
func TestUndeliverableEndpointFiltersAndFails(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	relay := fakeRelay{{OutboxID: 7, Service: "checkout", Version: 12, Reason: "too_large"},
		{OutboxID: 9, Service: "payments", Version: 3, Reason: "invalid"}}
	srv := httptest.NewServer(Handler(Options{Evaluations: fakeEval{}, Versions: st, Relay: relay}))
	defer srv.Close()
	var got struct {
		Undeliverable []distribution.Undeliverable `json:"undeliverable"`
	}
	if code := getJSON(t, srv.URL+Prefix+"/undeliverable?service=payments", &got); code != 200 ||
		len(got.Undeliverable) != 1 || got.Undeliverable[0].Version != 3 {
		t.Fatalf("?service=payments: %d %+v", code, got)
	}
	var fail map[string]string
	if code := getJSON(t, srv.URL+Prefix+"/undeliverable?service=Bad%20Name", &fail); code != 400 || !strings.Contains(fail["error"], "service") {
		t.Fatalf("bad service: %d %v", code, fail)
	}
	down := httptest.NewServer(Handler(Options{Evaluations: fakeEval{}, Versions: st, Relay: failingRelay{}}))
	defer down.Close()
	for _, path := range []string{"/undeliverable", "/services", "/services/checkout"} {
		if code := getJSON(t, down.URL+Prefix+path, &fail); code != 500 {
			t.Fatalf("%s with the store down: %d, want 500", path, code)
		}
	}
}

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode
}

// A version too large for the NATS server (max_payload 64 KiB), given up
// on by a real relay over a real store, shows in the API as the store
// records it: from a relay started after the fact too, and no longer once
// a newer version is published.
func TestUndeliverableFromTheStore(t *testing.T) {
	const maxPayload = 64 << 10
	ns, err := natsembed.Start(natsembed.Options{MaxPayload: maxPayload})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ns.Close() })
	stores := []struct {
		name string
		open func(t *testing.T) versioning.Store
	}{
		{"sqlite", func(t *testing.T) versioning.Store {
			s, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(t.TempDir(), "rules.db")})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
		{"postgres", func(t *testing.T) versioning.Store {
			if testing.Short() {
				t.Skip("-short: no machine PostgreSQL")
			}
			s, err := postgres.Open(context.Background(), postgres.Options{URL: testenv.Postgres(t)})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
	}
	for i, sc := range stores {
		t.Run(sc.name, func(t *testing.T) {
			ctx := context.Background()
			st := sc.open(t)
			t.Cleanup(func() { _ = st.Close() })
			nc, err := nats.Connect(ns.URL())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			names, err := watchNames(i)
			if err != nil {
				t.Fatal(err)
			}
			pub, err := distribution.NewPublisher(ctx, js, distribution.PublisherOptions{Names: names, Storage: jetstream.MemoryStorage})
			if err != nil {
				t.Fatal(err)
			}
			newRelay := func(name string) *distribution.Relay {
				r, err := distribution.NewRelay(distribution.RelayOptions{Outbox: st, Publisher: pub, Name: name})
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			big := approve(t, st, strings.Repeat("x", maxPayload))
			if _, err := newRelay("relay-a").Pass(ctx); !errors.Is(err, distribution.ErrTooLarge) {
				t.Fatalf("pass = %v, want ErrTooLarge", err)
			}

			// A relay started afterwards serves the API.
			srv := httptest.NewServer(Handler(Options{Evaluations: fakeEval{}, Versions: st, Relay: newRelay("relay-b")}))
			defer srv.Close()
			var all struct {
				Undeliverable []distribution.Undeliverable `json:"undeliverable"`
			}
			if code := getJSON(t, srv.URL+Prefix+"/undeliverable", &all); code != 200 || len(all.Undeliverable) != 1 {
				t.Fatalf("undeliverable: %d %+v", code, all)
			}
			u := all.Undeliverable[0]
			if u.Service != "checkout" || u.Version != big || u.Reason != distribution.ReasonTooLarge ||
				u.Limit != maxPayload-distribution.KVHeaderRoom || u.Size <= u.Limit || u.Relay != "relay-a" || u.At.IsZero() {
				t.Fatalf("undeliverable %+v", u)
			}
			var sv struct {
				Undeliverable []distribution.Undeliverable `json:"undeliverable"`
			}
			if code := getJSON(t, srv.URL+Prefix+"/services/checkout", &sv); code != 200 || len(sv.Undeliverable) != 1 || sv.Undeliverable[0] != u {
				t.Fatalf("service detail: %d %+v", code, sv)
			}

			small := approve(t, st, "")
			if _, err := newRelay("relay-c").Pass(ctx); err != nil {
				t.Fatal(err)
			}
			if latest, err := pub.Latest(ctx, "checkout"); err != nil || latest.Version != small {
				t.Fatalf("latest %v, %v; want v%d", latest, err, small)
			}
			all.Undeliverable = nil
			if code := getJSON(t, srv.URL+Prefix+"/undeliverable", &all); code != 200 || len(all.Undeliverable) != 0 {
				t.Fatalf("after v%d: %d %+v", small, code, all)
			}
			if _, err := st.VerifyAudit(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// approve makes a checkout version live whose only exempt path is "/" +
// pad, and returns its number.
func approve(t *testing.T, st versioning.Store, pad string) int64 {
	t.Helper()
	ctx := context.Background()
	rs := &rules.Ruleset{Service: "checkout", Routes: []rules.Route{{Name: "api", Match: rules.Match{PathPrefix: "/"},
		RateLimit: &rules.RateLimit{Rate: 10}, Exempt: &rules.Exempt{Paths: []string{"/" + pad}}}}}
	p, err := st.Propose(ctx, versioning.Proposal{Rebase: true, Ruleset: rs, Reason: "test",
		Author: versioning.Actor{Name: "alice", Roles: []versioning.Role{versioning.RoleOperator}}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := st.Approve(ctx, "checkout", p.Number, versioning.Actor{Name: "bob", Roles: []versioning.Role{versioning.RoleApprover}}, "ok")
	if err != nil {
		t.Fatal(err)
	}
	return v.Number
}

// watchNames gives each subtest its own bucket.
func watchNames(i int) (watch.Names, error) {
	return watch.NewNames(fmt.Sprintf("apitest%d", i))
}
