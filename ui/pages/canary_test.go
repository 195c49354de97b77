package pages

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/model"
)

// TestRulesPageShowsNoErrorTextFromTheURL: the rules page's error box
// shows no text a link carries (anyone could send a colleague a link to
// the real page saying "your session expired, re-enter your password
// at ..."). A refused canary form answers with the rules page itself, the
// refusal's status and the store's message, to its sender alone.
func TestRulesPageShowsNoErrorTextFromTheURL(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Rollouts = model.NewMemoryRollouts() })
	h.liveV2()
	ctx := context.Background()
	_, err := h.store.Propose(ctx, versioning.Proposal{BaseVersion: 2, Ruleset: harnessRuleset("checkout", 200),
		Author: versioning.Actor{Name: "alice", Roles: harnessUsers["alice"]}, Reason: "more"})
	require.NoError(t, err)
	sid, csrf := h.session("otto")
	spoof := "Your session expired, re-enter your password at evil.example"
	resp, body := h.do("GET", "/services/checkout/rules?error="+url.QueryEscape(spoof), sid, "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotContains(t, body, "Your session expired")
	require.NotContains(t, body, "banner-error")

	tests := []struct {
		name, path string
		form       url.Values
		status     int
		want       string
	}{
		{"abort of no canary", "/services/checkout/canary/abort", url.Values{"version": {"2"}}, http.StatusNotFound,
			"model: not found: no canary for checkout"},
		{"start of a proposal", "/services/checkout/canary", url.Values{"version": {"3"}, "percent": {"10"}}, http.StatusBadRequest,
			"ui: bad request: version: v3 is proposed; only approved versions are staged"},
		{"start at no share", "/services/checkout/canary", url.Values{"version": {"2"}, "percent": {"100"}}, http.StatusUnprocessableEntity,
			"model: invalid input: percent: must be above 0 and below 100, not 100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := h.do("POST", tt.path, sid, csrf, tt.form)
			require.Equal(t, tt.status, resp.StatusCode, body)
			require.Empty(t, resp.Header.Get("Location"))
			require.Contains(t, body, `<div class="banner banner-error" role="alert">`+tt.want)
			require.Contains(t, body, `<a href="/services/checkout/rules/2">v2</a>`, "the rules page, not an error page")
		})
	}
}

// TestRefusedCanaryStartKeepsWhatWasTyped: a refused canary start answers
// with the rules page whose start form holds the values the person sent
// (escaped), so they can correct them; the values come from the POSTed
// form only, never from the URL.
func TestRefusedCanaryStartKeepsWhatWasTyped(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Rollouts = model.NewMemoryRollouts() })
	h.liveV2()
	ctx := context.Background()
	_, err := h.store.Propose(ctx, versioning.Proposal{BaseVersion: 2, Ruleset: harnessRuleset("checkout", 200),
		Author: versioning.Actor{Name: "alice", Roles: harnessUsers["alice"]}, Reason: "more"})
	require.NoError(t, err)
	sid, csrf := h.session("otto")
	const (
		versionInput = `<input id="c-version" name="version" type="number" min="1" value="`
		percentInput = `<input id="c-percent" name="percent" type="number" min="1" max="99" value="`
	)

	resp, body := h.do("GET", "/services/checkout/rules?version=1&percent=77", sid, "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, versionInput+`3"`, "the newest version, not the URL's")
	require.Contains(t, body, percentInput+`10"`, "the default share, not the URL's")

	tests := []struct {
		name, query string
		form        url.Values
		status      int
		want        []string
	}{
		{"share out of range", "", url.Values{"version": {"2"}, "percent": {"100"}}, http.StatusUnprocessableEntity,
			[]string{versionInput + `2"`, percentInput + `100"`}},
		{"not a version", "", url.Values{"version": {"v2"}, "percent": {"12.5"}}, http.StatusBadRequest,
			[]string{versionInput + `v2"`, percentInput + `12.5"`}},
		{"markup escaped", "", url.Values{"version": {"2"}, "percent": {`"><script>alert(1)</script>`}}, http.StatusBadRequest,
			[]string{percentInput + `&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"`}},
		{"the URL's values ignored", "?version=1&percent=77", url.Values{"version": {"2"}}, http.StatusBadRequest,
			[]string{versionInput + `2"`, percentInput + `"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := h.do("POST", "/services/checkout/canary"+tt.query, sid, csrf, tt.form)
			require.Equal(t, tt.status, resp.StatusCode, body)
			require.Contains(t, body, `<div class="banner banner-error" role="alert">`)
			for _, w := range tt.want {
				require.Contains(t, body, w)
			}
			require.NotContains(t, body, "<script>alert")
			require.NotContains(t, body, `value="77"`)
		})
	}
}

// auditFails is a rules store that writes no audit entry (and, with
// listErr, lists no versions): the database went down after the action.
type auditFails struct {
	versioning.Store
	err, listErr error
}

func (a auditFails) RecordAudit(context.Context, versioning.AuditRecord) (versioning.AuditEntry, error) {
	return versioning.AuditEntry{}, a.err
}

func (a auditFails) List(ctx context.Context, f versioning.ListFilter) ([]versioning.Version, error) {
	if a.listErr != nil {
		return nil, a.listErr
	}
	return a.Store.List(ctx, f)
}

// TestCanaryActionWithoutItsAuditEntrySaysSo: a canary start, promote or
// abort that took effect but whose audit entry could not be written is not
// answered as if all went well: the page says what was done, that the
// audit log does not show it and why, with a 500, and the failure is
// logged. The versions' store being down too does not hide that.
func TestCanaryActionWithoutItsAuditEntrySaysSo(t *testing.T) {
	diskErr := fmt.Errorf("sqlite: disk I/O error")
	tests := []struct {
		name    string
		listErr error
		want    []string
	}{
		{"versions readable", nil, []string{`<a href="/services/checkout/rules/2">v2</a>`}},
		{"versions unreadable", fmt.Errorf("%w: connection refused", versioning.ErrUnavailable),
			[]string{"The versions could not be read: A backend is unavailable"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			h := newHarness(t, func(o *Options) {
				o.Rollouts = model.NewMemoryRollouts()
				o.Rules = auditFails{Store: o.Rules, err: diskErr, listErr: tt.listErr}
				o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			})
			h.liveV2()
			sid, csrf := h.session("alice")
			for _, step := range []struct{ path, percent, done string }{
				{"/services/checkout/canary", "10", "Canary v2 was staged to 10 % of the instances"},
				{"/services/checkout/canary/promote", "", "Canary v2 was promoted to everyone"},
				{"/services/checkout/canary", "25.5", "Canary v2 was staged to 25.5 % of the instances"},
				{"/services/checkout/canary/abort", "", "Canary v2 was aborted"},
			} {
				form := url.Values{"version": {"2"}}
				if step.percent != "" {
					form.Set("percent", step.percent)
				}
				resp, body := h.do("POST", step.path, sid, csrf, form)
				require.Equal(t, http.StatusInternalServerError, resp.StatusCode, body)
				require.Contains(t, body, step.done+", but its audit entry could not be written (an internal error; it has been logged): "+
					"the audit log does not show it; do not repeat it (reloading this page would send the form again).")
				require.NotContains(t, body, "disk I/O", "internal details stay in the log")
				for _, w := range tt.want {
					require.Contains(t, body, w)
				}
			}
			require.Equal(t, 4, bytes.Count(logs.Bytes(), []byte("pages: canary audit entry not written")), logs.String())
			require.Contains(t, logs.String(), "disk I/O error")
		})
	}
}
