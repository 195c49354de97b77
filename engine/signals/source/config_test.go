package source

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
	"governor.dev/governor/engine/signals/promapi"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // error substring; empty: valid
	}{
		{"empty is the embedded default", `{}`, ""},
		{"prometheus", `{"prometheus":{"address":"http://p:9090","timeout":"10s","retries":0},"window":"2m","maxAge":"5m"}`, ""},
		{"embedded", `{"embedded":{"interval":"5s","timeout":"2s","retention":"1h","targets":[{"url":"http://a:1/metrics","labels":{"zone":"a"}}]}}`, ""},
		{"template override", `{"templates":{"cpu":"avg by ({{.By}}) (rate(c{ {{.Selector}} }[{{.Window}}]))"}}`, ""},
		{"unknown field", `{"prometheus":{"adress":"http://p"}}`, `unknown field "adress"`},
		{"trailing data", `{} {}`, "trailing data"},
		{"not json", `window: 1m`, "config:"},
		{"bad duration", `{"window":"soon"}`, `bad duration "soon"`},
		{"number duration", `{"window":60}`, "want a duration string"},
		{"negative", `{"maxAge":"-1s"}`, "maxAge: must not be negative"},
		{"timeout over interval", `{"embedded":{"interval":"5s","timeout":"6s"}}`, "embedded.timeout: 6s exceeds the interval 5s"},
		{"timeout over the default interval", `{"embedded":{"timeout":"20s"}}`, "embedded.timeout: 20s exceeds the interval 15s"},
		// A window holding one scrape has no rate: every rate signal would
		// read missing while the target is up.
		{"window under two intervals", `{"window":"10s"}`, "window: 10s is shorter than two scrape intervals of 15s"},
		{"default window under two intervals", `{"embedded":{"interval":"45s"}}`, "window: 1m0s is shorter than two scrape intervals of 45s"},
		{"window of two intervals", `{"window":"30s"}`, ""},
		{"prometheus window is not bound to the embedded interval", `{"prometheus":{"address":"http://p:9090"},"window":"10s"}`, ""},
		{"both sources", `{"prometheus":{"address":"http://p:9090"},"embedded":{"interval":"5s"}}`, "embedded: must be empty when prometheus is set"},
		{"no address", `{"prometheus":{}}`, "prometheus.address: required"},
		{"negative retries", `{"prometheus":{"address":"http://p","retries":-2}}`, "prometheus.retries: must not be negative"},
		{"bad target", `{"embedded":{"targets":[{"url":"http://a/m"},{"url":"ftp://b/m"}]}}`, "embedded.targets[1].url: scheme must be http or https"},
		{"bad template", `{"templates":{"memory":"sum("}}`, "templates.memory: not valid PromQL"},
		{"unknown template", `{"templates":{"disk":"x"}}`, `unknown signal "disk"`},
		{"template not grouped by service", `{"templates":{"request_rate":"rate(governor_sdk_requests_total{ {{.Selector}} }[{{.Window}}])"}}`,
			`templates.request_rate: with {{.By}} = "service", must answer one sample per (service)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Decode([]byte(tt.in))
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, signals.ErrInvalidOption)
			require.ErrorContains(t, err, tt.want)
			require.Equal(t, Config{}, c, "nothing half-decoded is returned")
		})
	}
	c, err := Decode([]byte(`{"prometheus":{"address":"http://p:9090","timeout":"10s"},"window":"2m"}`))
	require.NoError(t, err)
	require.Equal(t, Duration(2*time.Minute), c.Window)
	require.Equal(t, Duration(10*time.Second), c.Prometheus.Timeout)
	require.Nil(t, c.Prometheus.Retries)

	_, err = Decode(make([]byte, MaxConfigBytes+1))
	require.ErrorContains(t, err, "at most")
}

func TestOpenEmbedded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("governor_sdk_rules_version{service=\"a\"} 1\ngovernor_sdk_inflight{service=\"a\",route=\"/\"} 5\n"))
	}))
	defer srv.Close()
	scraped := make(chan embedded.TargetStatus, 1)
	s, err := Open(Config{Embedded: Embedded{Targets: []embedded.Target{{URL: srv.URL}}}}, Deps{OnScrape: func(st embedded.TargetStatus) { scraped <- st }})
	require.NoError(t, err)
	require.NotNil(t, s.Store)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	st := <-scraped
	require.Equal(t, embedded.HealthUp, st.Health)
	snap, err := s.Reader.Read(context.Background(), st.LastScrape, signals.PerService)
	require.NoError(t, err)
	require.Equal(t, 5.0, snap.Get(signals.Key{Service: "a"}, signals.InFlight).V)
	cancel()
	require.NoError(t, <-done)
	require.NoError(t, s.Close())
}

func TestOpenPrometheus(t *testing.T) {
	none := 0
	s, err := Open(Config{Prometheus: &Prometheus{Address: "http://127.0.0.1:1", Retries: &none}}, Deps{})
	require.NoError(t, err)
	require.IsType(t, &promapi.Client{}, s.Source)
	require.Nil(t, s.Store)
	_, err = s.Reader.Read(context.Background(), time.Now(), signals.PerService)
	require.ErrorIs(t, err, signals.ErrUnavailable, "nothing listens on port 1")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, s.Run(ctx))
	require.NoError(t, s.Close())

	_, err = Open(Config{Window: -1}, Deps{})
	require.ErrorIs(t, err, signals.ErrInvalidOption)
}

// FuzzDecode: arbitrary configuration text is refused or accepted, never a
// panic, and an accepted configuration validates again after a round trip.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"prometheus":{"address":"http://p:9090","timeout":"10s","retries":1}}`,
		`{"embedded":{"interval":"5s","targets":[{"url":"http://a:1/metrics","job":"j","labels":{"zone":"a"}}]}}`,
		`{"templates":{"cpu":"sum by ({{.By}}) (x)"},"window":"30s","maxAge":"1m"}`,
		`{"window":"-5s"}`,
		`[]`,
		`{"embedded":{"targets":[{"url":"http://a"},{"url":"http://a"}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Decode(data)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("decoded config does not validate: %v", err)
		}
	})
}

// The embedded store's own metrics (head series, against its series limit;
// query durations) reach the registerer with the scraper's.
func TestOpenEmbeddedRegistersTheStoreMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := Open(Config{}, Deps{Registerer: reg})
	require.NoError(t, err)
	defer s.Close()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	require.True(t, names["prometheus_tsdb_head_series"], "TSDB metrics registered")
	require.True(t, names["governor_signals_scrapes_total"], "scraper metrics registered")
}
