package pages

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/configstore"
)

// memRouting is an in-memory model.AlertRouting holding saved versions as
// they are stored: with their secrets.
type memRouting struct{ vs []configstore.Version }

func (m *memRouting) Latest(context.Context) (configstore.Version, error) {
	if len(m.vs) == 0 {
		return configstore.Version{}, alerts.ErrNotFound
	}
	return m.vs[len(m.vs)-1], nil
}

func (m *memRouting) Get(_ context.Context, n int64) (configstore.Version, error) {
	if n < 1 || int(n) > len(m.vs) {
		return configstore.Version{}, fmt.Errorf("%w: version %d", alerts.ErrNotFound, n)
	}
	return m.vs[n-1], nil
}

func (m *memRouting) List(_ context.Context, limit int) ([]configstore.Version, error) {
	var out []configstore.Version
	for i := len(m.vs) - 1; i >= 0 && len(out) < limit; i-- {
		out = append(out, m.vs[i])
	}
	return out, nil
}

func (m *memRouting) ListPage(ctx context.Context, o configstore.ListOptions) ([]configstore.Version, error) {
	return m.List(ctx, o.Limit)
}

func (m *memRouting) Save(_ context.Context, r configstore.SaveRequest) (configstore.Version, error) {
	v := configstore.Version{Number: int64(len(m.vs) + 1), Document: r.Document, Author: r.Author, Comment: r.Comment,
		CreatedAt: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	m.vs = append(m.vs, v)
	return v, nil
}

func (m *memRouting) Rollback(ctx context.Context, r configstore.RollbackRequest) (configstore.Version, error) {
	v, err := m.Get(ctx, r.To)
	if err != nil {
		return v, err
	}
	return m.Save(ctx, configstore.SaveRequest{Document: v.Document, Author: r.Author, Comment: r.Comment})
}

// receiverSecrets are secret values of every receiver kind that has one.
var receiverSecrets = []string{"R0UTING-KEY-pd", "pd-events-token", "T000-slack-hook", "webhook-token", "am-password", "smtp-hunter2"}

// secretDocument holds receiverSecrets, differing in version n.
func secretDocument(n int) string {
	return fmt.Sprintf(`{"receivers": [
	  {"name": "pager", "pagerduty": {"routing_key": "R0UTING-KEY-pd-%[1]d", "url": "https://events.example/v2/enqueue?token=pd-events-token-%[1]d"}},
	  {"name": "team", "slack": {"url": "https://hooks.slack.example/services/T000-slack-hook-%[1]d"}},
	  {"name": "hook", "webhook": {"url": "https://hook.example/in?key=webhook-token-%[1]d"}},
	  {"name": "am", "alertmanager": {"url": "https://ops:am-password-%[1]d@am.example:9093"}},
	  {"name": "mail", "email": {"smarthost": "mail.example:25", "from": "g@example.com", "to": ["o@example.com"], "username": "u", "password": "smtp-hunter2-%[1]d"}}
	],
	"routes": [{"receiver": "pager", "severities": ["P0"], "continue": true}, {"receiver": "team"}]}`, n)
}

// findSecret walks v (pointers, structs with their unexported fields,
// slices, maps, interfaces) and returns the path of a string holding one
// of the secrets, "" if none does.
func findSecret(v reflect.Value, path string, secrets []string) string {
	switch v.Kind() {
	case reflect.String:
		for _, s := range secrets {
			if strings.Contains(v.String(), s) {
				return path
			}
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return findSecret(v.Elem(), path, secrets)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if p := findSecret(v.Field(i), path+"."+v.Type().Field(i).Name, secrets); p != "" {
				return p
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if p := findSecret(v.Index(i), fmt.Sprintf("%s[%d]", path, i), secrets); p != "" {
				return p
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if p := findSecret(it.Value(), fmt.Sprintf("%s[%v]", path, it.Key()), secrets); p != "" {
				return p
			}
		}
	}
	return ""
}

func newSecretPages(t *testing.T) *Pages {
	t.Helper()
	h := newHarness(t, nil)
	st := &memRouting{}
	for i := 1; i <= 3; i++ {
		_, err := st.Save(context.Background(), configstore.SaveRequest{Document: secretDocument(i), Author: "alice", Comment: fmt.Sprintf("v%d", i)})
		require.NoError(t, err)
	}
	p, err := New(Options{Rules: h.store, Auth: h.auth, Clock: h.clk, AlertRouting: st})
	require.NoError(t, err)
	return p
}

// TestAlertingTemplateDataHoldsNoSecret: the data the settings page (the
// version in force, the history, a version opened from it) and the
// alerting rollback page hand to their templates holds no receiver secret
// of any kind, of any version: a template edited later cannot show one.
func TestAlertingTemplateDataHoldsNoSecret(t *testing.T) {
	p := newSecretPages(t)
	for _, q := range []string{"", "?alerting_version=1", "?alerting_version=3"} {
		d, err := p.alertingSection(httptest.NewRequest(http.MethodGet, "/settings"+q, nil))
		require.NoError(t, err)
		require.Len(t, d.History, 3)
		require.Empty(t, findSecret(reflect.ValueOf(d), "settings"+q, receiverSecrets))
	}
	for _, n := range []string{"1", "3"} {
		r := httptest.NewRequest(http.MethodGet, "/settings/alerting/rollback/"+n, nil)
		rc := chi.NewRouteContext()
		rc.URLParams.Add("n", n)
		r = r.WithContext(context.WithValue(r.Context(), chi.RouteCtxKey, rc))
		d, err := p.alertingRollbackData(r)
		require.NoError(t, err)
		require.Empty(t, findSecret(reflect.ValueOf(d), "rollback "+n, receiverSecrets))
	}
}
