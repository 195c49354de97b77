package conformance

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/internal/sqlstore"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

func testOutboxLease(t *testing.T, f Factory) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	h := f(t, Options{Clock: clk})
	s := h.Store
	select {
	case <-s.OutboxReady():
		t.Fatal("no outbox row written yet")
	default:
	}
	v := live(t, s, "lease", 7)
	select {
	case <-s.OutboxReady():
	default:
		t.Fatal("an approval that writes an outbox row must signal OutboxReady")
	}

	items, err := s.ClaimOutbox(ctx, 10, 30*time.Second)
	require.NoError(t, err)
	require.Len(t, items, 1)
	it := items[0]
	require.Equal(t, "lease", it.Service)
	require.Equal(t, v.Number, it.Version)
	require.Equal(t, versioning.OutboxApproved, it.Kind)
	require.Equal(t, 1, it.Attempts)
	require.Equal(t, clk.Now().Add(30*time.Second), it.LeaseUntil)
	env, err := rules.DecodeEnvelope(it.Payload)
	require.NoError(t, err, "the payload is a verifiable envelope")
	require.Equal(t, v.Number, env.Version)
	require.Equal(t, v.Checksum, env.Checksum)
	require.Equal(t, it.Checksum, env.Checksum)

	items, err = s.ClaimOutbox(ctx, 10, 30*time.Second)
	require.NoError(t, err)
	require.Empty(t, items, "a leased row is not handed out twice")

	clk.Advance(31 * time.Second)
	items, err = s.ClaimOutbox(ctx, 10, 30*time.Second)
	require.NoError(t, err)
	require.Len(t, items, 1, "an expired lease frees the row for the next relay")
	require.Equal(t, 2, items[0].Attempts)

	require.NoError(t, s.MarkOutboxDone(ctx, it.ID))
	require.NoError(t, s.MarkOutboxDone(ctx, it.ID), "marking twice is a no-op")
	got, err := s.Get(ctx, "lease", v.Number)
	require.NoError(t, err)
	require.Equal(t, versioning.StatePublished, got.State)
	require.True(t, got.Active)
	require.Equal(t, clk.Now(), got.PublishedAt)
	clk.Advance(time.Hour)
	items, err = s.ClaimOutbox(ctx, 10, time.Second)
	require.NoError(t, err)
	require.Empty(t, items, "a published row is never claimed again")
	pubs, err := s.Audit(ctx, versioning.AuditFilter{Action: versioning.ActionPublish})
	require.NoError(t, err)
	require.Len(t, pubs, 1, "one publish entry despite two marks")
	require.Equal(t, sqlstore.RelayActor.Name, pubs[0].Actor)

	err = s.MarkOutboxDone(ctx, 999)
	require.ErrorIs(t, err, versioning.ErrNotFound)
	_, err = s.ClaimOutbox(ctx, 0, time.Second)
	require.Equal(t, []string{"limit"}, fieldsOf(t, err))
	_, err = s.ClaimOutbox(ctx, 1, 0)
	require.Equal(t, []string{"lease"}, fieldsOf(t, err))

	// A superseded version's row stays superseded when published late.
	v2 := live(t, s, "lease", 8)
	live(t, s, "lease", 9)
	items, err = s.ClaimOutbox(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, items, 2)
	require.Less(t, items[0].ID, items[1].ID, "oldest first")
	require.NoError(t, s.MarkOutboxDone(ctx, items[0].ID))
	got, err = s.Get(ctx, "lease", v2.Number)
	require.NoError(t, err)
	require.Equal(t, versioning.StateSuperseded, got.State)
	require.False(t, got.PublishedAt.IsZero())
}

func testOutboxConcurrentClaim(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	for i := range 6 {
		live(t, h.Store, "claim", float64(i+1))
	}
	var mu sync.Mutex
	seen := map[int64]int{}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for {
				items, err := h.Store.ClaimOutbox(ctx, 1, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if len(items) == 0 {
					return
				}
				mu.Lock()
				seen[items[0].ID]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Len(t, seen, 6)
	for id, n := range seen {
		require.Equal(t, 1, n, "row %d claimed by more than one relay", id)
	}
}

func testOutboxRetry(t *testing.T, f Factory) {
	ctx := context.Background()
	var mu sync.Mutex
	failures := map[string]int{}
	fail := map[string]bool{"approve": true, "rollback": true, "emergency_publish": true}
	h := f(t, Options{BeforeCommit: func(op string, attempt int) error {
		mu.Lock()
		defer mu.Unlock()
		if fail[op] && attempt == 1 {
			failures[op]++
			// Everything of the first attempt (approval, audit entries,
			// outbox row) was written and is now rolled back.
			return sqlstore.ErrRetryable
		}
		return nil
	}})
	s := h.Store
	v := live(t, s, "retry", 1)
	v2 := live(t, s, "retry", 2)
	r, err := s.Rollback(ctx, "retry", v.Number, alice, "back")
	require.NoError(t, err)
	e, err := s.EmergencyPublish(ctx, versioning.Proposal{Ruleset: ruleset("retry", 3), Author: root, Reason: "fire"})
	require.NoError(t, err)
	require.Equal(t, map[string]int{"approve": 2, "rollback": 1, "emergency_publish": 1}, failures)
	for _, n := range []int64{v.Number, v2.Number, r.Number, e.Number} {
		require.Equal(t, int64(1), outboxCount(t, h, "retry", n), "version %d", n)
	}
	require.Equal(t, int64(4), h.Count(ctx, `SELECT count(*) FROM rule_outbox`))
	require.Equal(t, int64(2), h.Count(ctx, `SELECT count(*) FROM rule_approvals`))
	require.Equal(t, []int64{4, 3, 2, 1}, func() []int64 {
		l, err := s.List(ctx, versioning.ListFilter{Service: "retry"})
		require.NoError(t, err)
		return numbers(l)
	}(), "a retried transaction takes no extra version number")
	rep, err := s.VerifyAudit(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2*3+1+1), rep.Entries)
	// A caller retrying an approval that did commit gets a clear error and
	// no second row.
	_, err = s.Approve(ctx, "retry", v2.Number, carol, "again")
	require.ErrorIs(t, err, versioning.ErrInvalidState)
	require.Equal(t, int64(1), outboxCount(t, h, "retry", v2.Number))
	err = h.Exec(ctx, `INSERT INTO rule_outbox (service, version, kind, checksum, payload, created_at)
		SELECT service, version, kind, checksum, payload, created_at FROM rule_outbox WHERE version = 1`)
	require.Error(t, err, "the schema refuses a second row for one version")
}

func testFailedTx(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{BeforeCommit: func(op string, attempt int) error {
		if op == "approve" {
			return sqlstore.ErrRetryable // fails every attempt
		}
		return nil
	}})
	v := propose(t, h.Store, "fail", 0, 1)
	before := auditCount(t, h)
	_, err := h.Store.Approve(ctx, "fail", v.Number, bob, "")
	require.ErrorIs(t, err, versioning.ErrUnavailable)
	require.Equal(t, before, auditCount(t, h))
	require.Equal(t, int64(0), h.Count(ctx, `SELECT count(*) FROM rule_outbox`))
	require.Equal(t, int64(0), h.Count(ctx, `SELECT count(*) FROM rule_approvals`))
	got, err := h.Store.Get(ctx, "fail", v.Number)
	require.NoError(t, err)
	require.Equal(t, versioning.StateProposed, got.State)
	require.False(t, got.Active)
}

func testBadInput(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	s := h.Store
	valid, err := json.Marshal(ruleset("bad", 1))
	require.NoError(t, err)
	huge := `{"service":"bad","routes":[` + strings.Repeat(`{"name":"r","match":{"path_prefix":"/"}},`, rules.MaxBytes/40) + `]}`
	imports := []struct {
		name   string
		format versioning.Format
		data   string
		fields []string
	}{
		{"invalid JSON", versioning.FormatJSON, `{"service": "bad",`, []string{"ruleset"}},
		{"unknown field", versioning.FormatJSON, `{"service":"bad","rout":[]}`, []string{"ruleset.rout"}},
		{"wrong type", versioning.FormatJSON, `{"service":"bad","routes":[{"name":"r","match":{"path_prefix":"/"},"rate_limit":{"rate":"fast"}}]}`,
			[]string{"ruleset.routes.rate_limit.rate"}},
		{"out of range", versioning.FormatJSON, `{"service":"bad","routes":[{"name":"r","match":{"path_prefix":"/"},"rate_limit":{"rate":-1},"concurrency":{},"shedding":{"reserved":1.5}}]}`,
			[]string{"ruleset.routes[0].rate_limit.rate", "ruleset.routes[0].shedding.reserved"}},
		{"oversized", versioning.FormatJSON, huge, []string{"ruleset"}},
		{"invalid YAML", versioning.FormatYAML, "service: [bad", []string{"ruleset"}},
		{"YAML unknown field", versioning.FormatYAML, "service: bad\nroutez: []\n", []string{"ruleset.routez"}},
		{"YAML out of range", versioning.FormatYAML, "service: bad\ndownstreams:\n  - name: db\n    retry:\n      budget: 2\n", []string{"ruleset.downstreams[0].retry.budget"}},
		{"unknown format", "toml", string(valid), []string{"format"}},
	}
	for _, tt := range imports {
		t.Run(tt.name, func(t *testing.T) {
			_, err := versioning.Import(ctx, s, tt.format, []byte(tt.data), versioning.ImportOptions{Author: alice, Reason: "import"})
			require.Equal(t, tt.fields, fieldsOf(t, err), "%v", err)
		})
	}
	bigEvidence := `{"x":"` + strings.Repeat("a", versioning.MaxEvidenceBytes) + `"}`
	proposals := []struct {
		name   string
		p      versioning.Proposal
		fields []string
	}{
		{"no ruleset", versioning.Proposal{Author: alice, Reason: "x"}, []string{"ruleset"}},
		{"invalid ruleset", versioning.Proposal{Ruleset: &rules.Ruleset{Service: "bad", Routes: []rules.Route{{Name: "", Match: rules.Match{PathPrefix: "x"}}}},
			Author: alice, Reason: "x"}, []string{"ruleset.routes[0].name", "ruleset.routes[0].match.path_prefix"}},
		{"service mismatch", versioning.Proposal{Service: "other", Ruleset: ruleset("bad", 1), Author: alice, Reason: "x"}, []string{"service"}},
		{"no reason", versioning.Proposal{Ruleset: ruleset("bad", 1), Author: alice}, []string{"reason"}},
		{"long reason", versioning.Proposal{Ruleset: ruleset("bad", 1), Author: alice, Reason: strings.Repeat("r", versioning.MaxReasonBytes+1)}, []string{"reason"}},
		{"evidence not JSON", versioning.Proposal{Ruleset: ruleset("bad", 1), Author: alice, Reason: "x", Evidence: []byte(`{"a":`)}, []string{"evidence"}},
		{"evidence too big", versioning.Proposal{Ruleset: ruleset("bad", 1), Author: alice, Reason: "x", Evidence: []byte(bigEvidence)}, []string{"evidence"}},
		{"no author", versioning.Proposal{Ruleset: ruleset("bad", 1), Reason: "x"}, []string{"author.name"}},
		{"unknown role", versioning.Proposal{Ruleset: ruleset("bad", 1), Author: versioning.Actor{Name: "x", Roles: []versioning.Role{"god"}}, Reason: "x"}, []string{"author.roles[0]"}},
		{"negative base", versioning.Proposal{BaseVersion: -1, Ruleset: ruleset("bad", 1), Author: alice, Reason: "x"}, []string{"base_version"}},
		{"unknown source", versioning.Proposal{Ruleset: ruleset("bad", 1), Author: alice, Reason: "x", Source: "cron"}, []string{"source"}},
	}
	for _, tt := range proposals {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Propose(ctx, tt.p)
			require.Equal(t, tt.fields, fieldsOf(t, err), "%v", err)
		})
	}
	_, err = s.EmergencyPublish(ctx, versioning.Proposal{Ruleset: ruleset("bad", -5), Author: root, Reason: "fire"})
	require.Equal(t, []string{"ruleset.routes[0].rate_limit.rate"}, fieldsOf(t, err))
	_, err = s.Approve(ctx, "bad", 0, versioning.Actor{Name: " "}, strings.Repeat("c", versioning.MaxCommentBytes+1))
	require.Equal(t, []string{"actor.name", "comment", "number"}, fieldsOf(t, err))

	require.Equal(t, int64(0), h.Count(ctx, `SELECT count(*) FROM rule_versions`), "nothing written")
	require.Equal(t, int64(0), h.Count(ctx, `SELECT count(*) FROM rule_services`))
	require.Equal(t, int64(0), auditCount(t, h))
	require.Equal(t, int64(0), h.Count(ctx, `SELECT count(*) FROM rule_outbox`))
}

func testYAML(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	s := h.Store
	v := live(t, s, "gitops", 25)
	out, err := versioning.ExportYAML(ctx, s, "gitops")
	require.NoError(t, err)
	require.Contains(t, string(out), "# service gitops, version 1, "+v.Checksum)
	require.Contains(t, string(out), "rate_limit:\n")
	edited := strings.Replace(string(out), "rate: 25", "rate: 30", 1)
	p, err := versioning.Import(ctx, s, versioning.FormatYAML, []byte(edited), versioning.ImportOptions{
		BaseVersion: 1, Author: alice, Reason: "from git"})
	require.NoError(t, err)
	require.Equal(t, versioning.SourceImport, p.Source)
	require.Equal(t, versioning.StateProposed, p.State, "an import still needs approval")
	require.Equal(t, []versioning.Change{{Path: "routes[api].rate_limit.rate", Op: versioning.OpChanged, Old: []byte("25"), New: []byte("30")}},
		versioning.Diff(v.Ruleset, p.Ruleset))
	same, err := versioning.Import(ctx, s, versioning.FormatYAML, out, versioning.ImportOptions{BaseVersion: 1, Author: alice, Reason: "same"})
	require.NoError(t, err)
	require.Equal(t, v.Checksum, same.Checksum, "export then import gives the same checksum")
	_, err = versioning.ExportYAML(ctx, s, "nothing")
	require.ErrorIs(t, err, versioning.ErrNotFound)
}
