package engineclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"governor.dev/governor/ui/engineclient"
)

// Whatever the engine answers, Services returns services or an error
// (ErrEngine, or the engine's problems with the services), and a load
// score only for a service whose score is known.
func FuzzServices(f *testing.F) {
	for _, s := range []string{`{}`, `null`, `[`, `{"services":null}`, `{"services":{}}`,
		`{"services":[{"service":"a","score":{"at":"2026-01-01T00:00:00Z","value":0.5,"known":true,"raw":{"terms":[{"term":"latency","input":{"value":0.2},"normalized":0.4,"known":true}]}},"instances":{"SYNCED":2}}],"last_tick":"2026-01-01T00:00:00Z"}`,
		`{"services":[{"service":"a","score":{"value":null,"known":true}}],"problems":["ledger: down"]}`,
		`{"services":[{"service":"a","score":{"value":0.5,"known":false,"raw":{"terms":[{"term":"x","normalized":null,"known":true}]}}}]}`,
		`{"last_tick":"yesterday"}`} {
		f.Add(s)
	}
	var body atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(body.Load().(string)))
	}))
	f.Cleanup(srv.Close)
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	c, err := engineclient.New(engineclient.Options{BaseURL: srv.URL, MaxAge: -1, TrendLen: 3, Now: func() time.Time { return now }})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b string) {
		body.Store(b)
		svcs, err := c.Services(context.Background())
		if err != nil && svcs == nil && !errors.Is(err, engineclient.ErrEngine) {
			t.Fatalf("error without services is not ErrEngine: %v", err)
		}
		for _, s := range svcs {
			if len(s.Trend) > 3 {
				t.Fatalf("trend longer than TrendLen: %d", len(s.Trend))
			}
			for _, tm := range s.Terms {
				if tm.Name == "" && tm.Value != tm.Value {
					t.Fatalf("NaN term: %+v", tm)
				}
			}
		}
	})
}

// Whatever the engine's ledger answers, Instances returns instances or an
// ErrEngine error.
func FuzzInstances(f *testing.F) {
	for _, s := range []string{`{}`, `null`, `[`, `{"instances":null}`, `{"instances":{}}`,
		`{"instances":[{"instance":"i1","running":3,"target":4,"state":"NACKED","since":"2026-01-01T00:00:00Z","last_seen":"2026-01-01T00:00:05+02:00","nack_error":"bad"}]}`,
		`{"instances":[{"running":"3"}]}`, `{"instances":[{"since":"yesterday"}]}`} {
		f.Add(s)
	}
	var body atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(body.Load().(string)))
	}))
	f.Cleanup(srv.Close)
	c, err := engineclient.New(engineclient.Options{BaseURL: srv.URL})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b string) {
		body.Store(b)
		_, err := c.Instances(context.Background(), "checkout")
		if err != nil && !errors.Is(err, engineclient.ErrEngine) {
			t.Fatalf("error not ErrEngine: %v", err)
		}
	})
}
