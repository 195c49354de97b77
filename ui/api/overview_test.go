package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui/api"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/model"
)

// TestOverviewCountsUnpublishedInstancesAsDocumented: the overview's
// rollout counts the instances no rule version is published for under
// "unpublished", apart from "synced", and every rollout field the API
// answers is in the OpenAPI document.
func TestOverviewCountsUnpublishedInstancesAsDocumented(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:", Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	fleet := &model.StaticFleet{}
	fleet.Set([]model.ServiceStatus{{Name: "orders", Rollout: model.Rollout{Pending: 1, Unpublished: 2}}}, nil)
	a, err := api.New(api.Options{Rules: st, Fleet: fleet, Clock: clk})
	require.NoError(t, err)
	p := &auth.Principal{User: auth.User{Name: "ada"}, Roles: []versioning.Role{versioning.RoleViewer}}
	r := chi.NewRouter()
	r.Use(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
		})
	})
	r.Route("/api/v1", a.Routes)

	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest("GET", "/api/v1/overview", nil))
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var ov struct {
		Services []struct {
			Rollout map[string]any `json:"rollout"`
		} `json:"services"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &ov))
	require.Len(t, ov.Services, 1)
	ro := ov.Services[0].Rollout
	require.EqualValues(t, 2, ro["unpublished"])
	require.EqualValues(t, 0, ro["synced"])

	var doc struct {
		Components struct {
			Schemas struct {
				Overview struct {
					Properties struct {
						Services struct {
							Items struct {
								Properties struct {
									Rollout struct {
										Properties map[string]any `yaml:"properties"`
									} `yaml:"rollout"`
								} `yaml:"properties"`
							} `yaml:"items"`
						} `yaml:"services"`
					} `yaml:"properties"`
				} `yaml:"Overview"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	require.NoError(t, yaml.Unmarshal(api.OpenAPI(), &doc))
	documented := doc.Components.Schemas.Overview.Properties.Services.Items.Properties.Rollout.Properties
	require.NotEmpty(t, documented)
	for k := range ro {
		require.Contains(t, documented, k, "rollout field %q undocumented", k)
	}
}

// TestOverviewProblemsNamePartialAndFailedSignals: the API's overview
// lists a partial signal and a failed signal query as problems of their
// own, worded apart from "metrics unavailable", with the values that did
// come back.
func TestOverviewProblemsNamePartialAndFailedSignals(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:", Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	p99 := 0.25
	fleet := &model.StaticFleet{}
	fleet.Set([]model.ServiceStatus{{Name: "orders", P99: &p99}}, &model.SignalError{Signals: []model.SignalProblem{
		{Signal: "request_rate", Reason: "store-eu-1 did not answer"},
		{Signal: "error_ratio", Failed: true, Reason: "timed out"},
	}})
	a, err := api.New(api.Options{Rules: st, Fleet: fleet, Clock: clk})
	require.NoError(t, err)
	p := &auth.Principal{User: auth.User{Name: "ada"}, Roles: []versioning.Role{versioning.RoleViewer}}
	r := chi.NewRouter()
	r.Use(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
		})
	})
	r.Route("/api/v1", a.Routes)

	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest("GET", "/api/v1/overview", nil))
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var ov struct {
		Services []struct {
			P99 *float64 `json:"p99_seconds"`
		} `json:"services"`
		Problems []string `json:"problems"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &ov))
	require.Equal(t, []string{
		"metrics partial: request_rate: store-eu-1 did not answer",
		"metrics query failed: error_ratio: timed out",
	}, ov.Problems)
	require.Len(t, ov.Services, 1)
	require.NotNil(t, ov.Services[0].P99)
	require.Equal(t, 0.25, *ov.Services[0].P99)
}
