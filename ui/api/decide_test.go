package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/ui/api"
	"governor.dev/governor/ui/auth"
)

// decideEnv is the API over an in-memory rules store; each request is made
// by the user its testUser header names, with the operator and approver
// roles (the author otto, the approvers bob and carol).
type decideEnv struct {
	h  http.Handler
	st versioning.Store
}

const testUser = "Test-User"

var (
	deciders = []versioning.Role{versioning.RoleOperator, versioning.RoleApprover}
	otto     = versioning.Actor{Name: "otto", Roles: deciders}
	bob      = versioning.Actor{Name: "bob", Roles: deciders}
	carol    = versioning.Actor{Name: "carol", Roles: deciders}
)

// newDecideEnv starts with a service bank whose policy asks for
// approvals approvals; opts edit the API's options (over the store).
func newDecideEnv(t *testing.T, approvals int, opts ...func(*api.Options)) *decideEnv {
	t.Helper()
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:", Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	_, err = st.SetPolicy(ctx, versioning.Policy{Service: "bank", ApprovalsRequired: approvals},
		versioning.Actor{Name: "root", Roles: []versioning.Role{versioning.RoleAdmin}})
	require.NoError(t, err)
	o := api.Options{Rules: st, Clock: clk}
	for _, f := range opts {
		f(&o)
	}
	a, err := api.New(o)
	require.NoError(t, err)
	r := chi.NewRouter()
	r.Use(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := &auth.Principal{User: auth.User{Name: r.Header.Get(testUser)}, Roles: deciders}
			next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
		})
	})
	r.Route("/api/v1", a.Routes)
	return &decideEnv{h: r, st: st}
}

func bankRuleset(rate float64) *rules.Ruleset {
	return &rules.Ruleset{Service: "bank", Routes: []rules.Route{{
		Name: "api", Match: rules.Match{PathPrefix: "/api"}, RateLimit: &rules.RateLimit{Rate: rate, Burst: 10},
	}}}
}

// propose stores otto's proposal of rate on top of the active version.
func (e *decideEnv) propose(t *testing.T, rate float64) versioning.Version {
	t.Helper()
	ctx := context.Background()
	base := int64(0)
	if a, err := e.st.Active(ctx, "bank"); err == nil {
		base = a.Number
	}
	v, err := e.st.Propose(ctx, versioning.Proposal{BaseVersion: base, Ruleset: bankRuleset(rate), Author: otto, Reason: "r"})
	require.NoError(t, err)
	return v
}

// decide posts a decision on version n as user and returns the answer and
// the version it holds (zero for an error document).
func (e *decideEnv) decide(t *testing.T, user, kind string, n int64, body string) (*httptest.ResponseRecorder, versioning.Version) {
	t.Helper()
	r := httptest.NewRequest("POST", fmt.Sprintf("/api/v1/services/bank/versions/%d/%s", n, kind), strings.NewReader(body))
	r.Header.Set(testUser, user)
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	var v versioning.Version
	if w.Code == http.StatusOK {
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &v), w.Body.String())
	}
	return w, v
}

func (e *decideEnv) auditLen(t *testing.T) int {
	t.Helper()
	entries, err := e.st.Audit(context.Background(), versioning.AuditFilter{Service: "bank", Limit: 1000})
	require.NoError(t, err)
	return len(entries)
}

func decisionBody(comment, checksum string) string {
	b, _ := json.Marshal(api.DecisionRequest{Comment: comment, Checksum: checksum})
	return string(b)
}

// TestRetriedApprovalIsRecordedOnce: a client that lost the answer to its
// approval and sends it again gets 200, the version as it is now and
// X-Governor-Already-Recorded: true, not a 409, both while the proposal
// waits for more approvals and after its approval made it go live; nothing
// is written twice.
func TestRetriedApprovalIsRecordedOnce(t *testing.T) {
	e := newDecideEnv(t, 2)
	v := e.propose(t, 5)
	first := decisionBody("lgtm", v.Checksum)

	w, got := e.decide(t, "bob", "approve", v.Number, first)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.Empty(t, w.Header().Get(api.HeaderAlreadyRecorded), "a first approval is not a repeat")
	audited := e.auditLen(t)

	for _, body := range []string{first, decisionBody("lgtm", "")} {
		w, got = e.decide(t, "bob", "approve", v.Number, body)
		require.Equal(t, http.StatusOK, w.Code, "%s: %s", body, w.Body.String())
		require.Equal(t, "true", w.Header().Get(api.HeaderAlreadyRecorded))
		require.Equal(t, versioning.StateProposed, got.State)
		require.Len(t, got.Approvals, 1, "no second approval")
		require.Equal(t, audited, e.auditLen(t), "no second audit entry")
	}
	w, got = e.decide(t, "Bob", "approve", v.Number, first)
	require.Equal(t, http.StatusOK, w.Code, "the same person in another case: %s", w.Body.String())
	require.Equal(t, "true", w.Header().Get(api.HeaderAlreadyRecorded))

	// Carol's approval makes it live; her retry, and bob's, still stand.
	w, got = e.decide(t, "carol", "approve", v.Number, decisionBody("", v.Checksum))
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.True(t, got.Active)
	audited = e.auditLen(t)
	for _, who := range []string{"carol", "bob"} {
		comment := ""
		if who == "bob" {
			comment = "lgtm"
		}
		w, got = e.decide(t, who, "approve", v.Number, decisionBody(comment, v.Checksum))
		require.Equal(t, http.StatusOK, w.Code, "%s: %s", who, w.Body.String())
		require.Equal(t, "true", w.Header().Get(api.HeaderAlreadyRecorded), who)
		require.Equal(t, versioning.StateApproved, got.State)
		require.True(t, got.Active)
		require.Len(t, got.Approvals, 2)
		require.Equal(t, audited, e.auditLen(t), "%s: no second audit entry", who)
	}
}

// TestApprovalConflictsStay409: a request that is not a repeat of an
// approval that stands is still refused with 409 and writes nothing.
func TestApprovalConflictsStay409(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		// setup returns the version to approve and the body bob sends.
		setup func(t *testing.T, e *decideEnv) (int64, string)
		want  string
	}{
		{"another comment", func(t *testing.T, e *decideEnv) (int64, string) {
			v := e.propose(t, 5)
			_, err := e.st.ApproveChecksum(ctx, "bank", v.Number, v.Checksum, bob, "lgtm")
			require.NoError(t, err)
			return v.Number, decisionBody("second thoughts", v.Checksum)
		}, "bob already approved"},
		{"revised since", func(t *testing.T, e *decideEnv) (int64, string) {
			v := e.propose(t, 5)
			_, err := e.st.ApproveChecksum(ctx, "bank", v.Number, v.Checksum, bob, "lgtm")
			require.NoError(t, err)
			_, err = e.st.Revise(ctx, "bank", v.Number, versioning.Proposal{Ruleset: bankRuleset(6), Author: otto, Reason: "r2"})
			require.NoError(t, err)
			return v.Number, decisionBody("lgtm", v.Checksum)
		}, "revised since"},
		{"rejected by another", func(t *testing.T, e *decideEnv) (int64, string) {
			v := e.propose(t, 5)
			_, err := e.st.ApproveChecksum(ctx, "bank", v.Number, v.Checksum, bob, "lgtm")
			require.NoError(t, err)
			_, err = e.st.Reject(ctx, "bank", v.Number, carol, "no")
			require.NoError(t, err)
			return v.Number, decisionBody("lgtm", v.Checksum)
		}, "already rejected by carol"},
		{"rebased", func(t *testing.T, e *decideEnv) (int64, string) {
			stale := e.propose(t, 5)
			_, err := e.st.ApproveChecksum(ctx, "bank", stale.Number, stale.Checksum, bob, "lgtm")
			require.NoError(t, err)
			other := e.propose(t, 7)
			_, err = e.st.Approve(ctx, "bank", other.Number, bob, "")
			require.NoError(t, err)
			_, err = e.st.Approve(ctx, "bank", other.Number, carol, "")
			require.NoError(t, err)
			_, err = e.st.Rebase(ctx, "bank", stale.Number, otto)
			require.NoError(t, err)
			return stale.Number, decisionBody("lgtm", stale.Checksum)
		}, "already withdrawn"},
		{"never approved", func(t *testing.T, e *decideEnv) (int64, string) {
			v := e.propose(t, 5)
			_, err := e.st.Reject(ctx, "bank", v.Number, carol, "no")
			require.NoError(t, err)
			return v.Number, decisionBody("", "")
		}, "already rejected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newDecideEnv(t, 2)
			n, body := tt.setup(t, e)
			before, err := e.st.Get(ctx, "bank", n)
			require.NoError(t, err)
			audited := e.auditLen(t)
			w, _ := e.decide(t, "bob", "approve", n, body)
			require.Equal(t, http.StatusConflict, w.Code, w.Body.String())
			require.Contains(t, w.Body.String(), tt.want)
			require.Empty(t, w.Header().Get(api.HeaderAlreadyRecorded))
			after, err := e.st.Get(ctx, "bank", n)
			require.NoError(t, err)
			require.Equal(t, before, after, "nothing written")
			require.Equal(t, audited, e.auditLen(t))
		})
	}
}

// TestRetriedRejectAndWithdrawAreRecordedOnce: a repeated rejection or
// withdrawal by the one who made it, with the same comment, answers 200
// with the header; by another person or with another comment, 409.
func TestRetriedRejectAndWithdrawAreRecordedOnce(t *testing.T) {
	tests := []struct {
		kind, by string
		state    versioning.State
	}{
		{"reject", "carol", versioning.StateRejected},
		{"withdraw", "otto", versioning.StateWithdrawn},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			e := newDecideEnv(t, 1)
			v := e.propose(t, 5)
			w, got := e.decide(t, tt.by, tt.kind, v.Number, decisionBody("no", ""))
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			require.Empty(t, w.Header().Get(api.HeaderAlreadyRecorded))
			audited := e.auditLen(t)

			w, got = e.decide(t, tt.by, tt.kind, v.Number, decisionBody("no", ""))
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			require.Equal(t, "true", w.Header().Get(api.HeaderAlreadyRecorded))
			require.Equal(t, tt.state, got.State)
			require.Equal(t, tt.by, got.DecidedBy)
			require.Equal(t, audited, e.auditLen(t), "no second audit entry")

			w, _ = e.decide(t, tt.by, tt.kind, v.Number, decisionBody("another", ""))
			require.Equal(t, http.StatusConflict, w.Code, "another comment: %s", w.Body.String())
			w, _ = e.decide(t, "bob", "reject", v.Number, decisionBody("no", ""))
			require.Equal(t, http.StatusConflict, w.Code, "another person: %s", w.Body.String())
			require.Empty(t, w.Header().Get(api.HeaderAlreadyRecorded))
			w, _ = e.decide(t, "bob", "approve", v.Number, decisionBody("", v.Checksum))
			require.Equal(t, http.StatusConflict, w.Code, "closed: %s", w.Body.String())
			require.Equal(t, audited, e.auditLen(t))
		})
	}
}

// staleProposal gives bank a live version and otto's proposal of rate 5
// on the one before it (stale), which it returns.
func (e *decideEnv) staleProposal(t *testing.T) versioning.Version {
	t.Helper()
	ctx := context.Background()
	stale := e.propose(t, 5)
	other := e.propose(t, 7)
	_, err := e.st.Approve(ctx, "bank", other.Number, bob, "")
	require.NoError(t, err)
	_, err = e.st.Approve(ctx, "bank", other.Number, carol, "")
	require.NoError(t, err)
	return stale
}

// rebasedByOtto makes a stale proposal and otto's rebase of it; it returns
// both.
func (e *decideEnv) rebasedByOtto(t *testing.T) (stale, rebased versioning.Version) {
	t.Helper()
	stale = e.staleProposal(t)
	rebased, err := e.st.Rebase(context.Background(), "bank", stale.Number, otto)
	require.NoError(t, err)
	return stale, rebased
}

func (e *decideEnv) versionCount(t *testing.T) int {
	t.Helper()
	vs, err := e.st.List(context.Background(), versioning.ListFilter{Service: "bank", Limit: 1000})
	require.NoError(t, err)
	return len(vs)
}

// TestRetriedRebaseIsRecordedOnce: a client that lost the answer to its
// rebase and sends it again gets 200, the rebased version as it is now and
// X-Governor-Already-Recorded: true, not a 409; nothing is written twice.
func TestRetriedRebaseIsRecordedOnce(t *testing.T) {
	e := newDecideEnv(t, 2)
	stale := e.staleProposal(t)

	w, first := e.decide(t, "otto", "rebase", stale.Number, "")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.Empty(t, w.Header().Get(api.HeaderAlreadyRecorded), "a first rebase is not a repeat")
	audited, versions := e.auditLen(t), e.versionCount(t)

	for _, who := range []string{"otto", "Otto"} {
		for _, body := range []string{"", "{}"} {
			w, got := e.decide(t, who, "rebase", stale.Number, body)
			require.Equal(t, http.StatusOK, w.Code, "%s %q: %s", who, body, w.Body.String())
			require.Equal(t, "true", w.Header().Get(api.HeaderAlreadyRecorded))
			require.Equal(t, first, got, "the rebased version as it is")
			require.Equal(t, audited, e.auditLen(t), "no second audit entry")
			require.Equal(t, versions, e.versionCount(t), "no second version")
		}
	}
}

// TestRebaseConflictsStay409: a rebase that does not repeat one that
// stands unchanged is refused with 409 and the store's message, writing
// nothing.
func TestRebaseConflictsStay409(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		// setup returns the version to rebase and who sends the rebase.
		setup func(t *testing.T, e *decideEnv) (int64, string)
		want  string
	}{
		{"not stale, never rebased", func(t *testing.T, e *decideEnv) (int64, string) {
			return e.propose(t, 5).Number, "otto"
		}, "already based on the active version"},
		{"withdrawn, not rebased", func(t *testing.T, e *decideEnv) (int64, string) {
			stale := e.staleProposal(t)
			_, err := e.st.Withdraw(ctx, "bank", stale.Number, otto, "")
			require.NoError(t, err)
			return stale.Number, "otto"
		}, "already withdrawn by otto"},
		{"withdrawn with a rebase's words", func(t *testing.T, e *decideEnv) (int64, string) {
			stale := e.staleProposal(t)
			active, err := e.st.Active(ctx, "bank")
			require.NoError(t, err)
			same, err := e.st.Propose(ctx, versioning.Proposal{BaseVersion: active.Number, Ruleset: bankRuleset(5), Author: otto, Reason: "r"})
			require.NoError(t, err)
			_, err = e.st.Withdraw(ctx, "bank", stale.Number, otto, fmt.Sprintf("rebased as version %d", same.Number))
			require.NoError(t, err)
			return stale.Number, "otto"
		}, "already withdrawn by otto"},
		{"rejected", func(t *testing.T, e *decideEnv) (int64, string) {
			stale := e.staleProposal(t)
			_, err := e.st.Reject(ctx, "bank", stale.Number, carol, "no")
			require.NoError(t, err)
			return stale.Number, "otto"
		}, "already rejected by carol"},
		{"rebased by another", func(t *testing.T, e *decideEnv) (int64, string) {
			stale := e.staleProposal(t)
			_, err := e.st.Rebase(ctx, "bank", stale.Number, otto)
			require.NoError(t, err)
			return stale.Number, "bob"
		}, "already withdrawn by otto"},
		{"revised since", func(t *testing.T, e *decideEnv) (int64, string) {
			stale, nv := e.rebasedByOtto(t)
			_, err := e.st.Revise(ctx, "bank", nv.Number, versioning.Proposal{BaseVersion: nv.Parent, Ruleset: bankRuleset(6), Author: otto, Reason: "r2"})
			require.NoError(t, err)
			return stale.Number, "otto"
		}, "already withdrawn by otto"},
		{"reason revised since", func(t *testing.T, e *decideEnv) (int64, string) {
			stale, nv := e.rebasedByOtto(t)
			_, err := e.st.Revise(ctx, "bank", nv.Number, versioning.Proposal{BaseVersion: nv.Parent, Ruleset: bankRuleset(5), Author: otto, Reason: "r2"})
			require.NoError(t, err)
			return stale.Number, "otto"
		}, "already withdrawn by otto"},
		{"approved since", func(t *testing.T, e *decideEnv) (int64, string) {
			stale, nv := e.rebasedByOtto(t)
			_, err := e.st.Approve(ctx, "bank", nv.Number, bob, "")
			require.NoError(t, err)
			return stale.Number, "otto"
		}, "already withdrawn by otto"},
		{"rebased version withdrawn since", func(t *testing.T, e *decideEnv) (int64, string) {
			stale, nv := e.rebasedByOtto(t)
			_, err := e.st.Withdraw(ctx, "bank", nv.Number, otto, "")
			require.NoError(t, err)
			return stale.Number, "otto"
		}, "already withdrawn by otto"},
		{"another version live since", func(t *testing.T, e *decideEnv) (int64, string) {
			stale := e.staleProposal(t)
			_, err := e.st.Rebase(ctx, "bank", stale.Number, otto)
			require.NoError(t, err)
			e.staleProposal(t) // two more versions; the later one goes live
			return stale.Number, "otto"
		}, "already withdrawn by otto"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newDecideEnv(t, 2)
			n, who := tt.setup(t, e)
			before, err := e.st.Get(ctx, "bank", n)
			require.NoError(t, err)
			audited, versions := e.auditLen(t), e.versionCount(t)
			w, _ := e.decide(t, who, "rebase", n, "")
			require.Equal(t, http.StatusConflict, w.Code, w.Body.String())
			require.Contains(t, w.Body.String(), tt.want)
			require.Empty(t, w.Header().Get(api.HeaderAlreadyRecorded))
			after, err := e.st.Get(ctx, "bank", n)
			require.NoError(t, err)
			require.Equal(t, before, after, "nothing written")
			require.Equal(t, audited, e.auditLen(t))
			require.Equal(t, versions, e.versionCount(t))
		})
	}
}

// TestAlreadyRecordedHeaderDocumented: the decisions' 200 answers document
// the header in the OpenAPI document.
func TestAlreadyRecordedHeaderDocumented(t *testing.T) {
	var doc struct {
		Paths map[string]struct {
			Post struct {
				Responses map[string]struct {
					Headers map[string]any `yaml:"headers"`
				} `yaml:"responses"`
			} `yaml:"post"`
		} `yaml:"paths"`
	}
	require.NoError(t, yaml.Unmarshal(api.OpenAPI(), &doc))
	for _, kind := range []string{"approve", "reject", "withdraw", "rebase"} {
		p := doc.Paths["/services/{service}/versions/{n}/"+kind]
		require.Contains(t, p.Post.Responses["200"].Headers, api.HeaderAlreadyRecorded, kind)
	}
}

// TestOpenAPIHasNoSplitFlowMappings: no value of the OpenAPI document is
// empty. In a flow mapping ({description: a, b, content: ...}) an unquoted
// comma ends the description and makes the rest a key without a value,
// which the document's readers take for an unknown field (a response
// object allows none) and a truncated description.
func TestOpenAPIHasNoSplitFlowMappings(t *testing.T) {
	var doc any
	require.NoError(t, yaml.Unmarshal(api.OpenAPI(), &doc))
	var empty []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if x == nil {
					empty = append(empty, fmt.Sprintf("%s: %q", path, k))
				}
				walk(path+"/"+k, x)
			}
		case []any:
			for i, x := range v {
				walk(fmt.Sprintf("%s/%d", path, i), x)
			}
		}
	}
	walk("", doc)
	require.Empty(t, empty, "keys without a value (quote descriptions holding a comma)")
}
