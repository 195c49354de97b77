package versioning_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/internal/conformance"
	"governor.dev/governor/sdk/clock"
)

func chain(n int) []versioning.AuditEntry {
	prev := versioning.GenesisHash
	at := time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC)
	out := make([]versioning.AuditEntry, n)
	for i := range out {
		e := versioning.AuditEntry{Seq: int64(i + 1), At: at.Add(time.Duration(i) * time.Second), Actor: "alice",
			Roles: []versioning.Role{versioning.RoleOperator}, Action: versioning.ActionPropose, Service: "s",
			Version: int64(i + 1), Detail: json.RawMessage(`{"n":1}`), PrevHash: prev}
		e.Hash = e.ComputeHash()
		prev = e.Hash
		out[i] = e
	}
	return out
}

func TestHashInputIsCanonical(t *testing.T) {
	e := chain(1)[0]
	require.Equal(t, `{"seq":1,"at":"2026-03-04T05:06:07.123456Z","actor":"alice","roles":["operator"],"action":"propose",`+
		`"service":"s","version":1,"detail":{"n":1},"prev_hash":"`+versioning.GenesisHash+`"}`, string(e.HashInput()))
	// The same instant in another zone hashes the same.
	e2 := e
	e2.At = e.At.In(time.FixedZone("x", 3600))
	require.Equal(t, e.ComputeHash(), e2.ComputeHash())
	// Nil roles and detail hash like empty ones.
	e3, e4 := e, e
	e3.Roles, e3.Detail = nil, nil
	e4.Roles, e4.Detail = []versioning.Role{}, json.RawMessage(`{}`)
	require.Equal(t, e3.ComputeHash(), e4.ComputeHash())
	// Corrupt detail still hashes (to something that will not verify).
	e5 := e
	e5.Detail = json.RawMessage(`{"n":`)
	require.NotEqual(t, e.ComputeHash(), e5.ComputeHash())
}

func TestVerifyChain(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(c []versioning.AuditEntry) []versioning.AuditEntry
		seq     int64
		problem string
	}{
		{"intact", func(c []versioning.AuditEntry) []versioning.AuditEntry { return c }, 0, ""},
		{"edited actor", func(c []versioning.AuditEntry) []versioning.AuditEntry { c[2].Actor = "mallory"; return c }, 3, "does not match its hash"},
		{"edited and rehashed", func(c []versioning.AuditEntry) []versioning.AuditEntry {
			c[1].Detail = json.RawMessage(`{"n":2}`)
			c[1].Hash = c[1].ComputeHash()
			return c
		}, 3, "prev_hash"},
		{"removed entry", func(c []versioning.AuditEntry) []versioning.AuditEntry { return append(c[:1], c[2:]...) }, 3, "sequence jumps from 1 to 3"},
		{"reordered", func(c []versioning.AuditEntry) []versioning.AuditEntry { c[0], c[1] = c[1], c[0]; return c }, 2, "sequence jumps from 0 to 2"},
		{"edited time", func(c []versioning.AuditEntry) []versioning.AuditEntry {
			c[3].At = c[3].At.Add(time.Microsecond)
			return c
		}, 4, "does not match its hash"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.edit(chain(5))
			seq, head, err := versioning.VerifyChain(0, versioning.GenesisHash, c)
			if tt.seq == 0 {
				require.NoError(t, err)
				require.Equal(t, int64(5), seq)
				require.Equal(t, c[4].Hash, head)
				return
			}
			require.ErrorIs(t, err, versioning.ErrTampered)
			var ce *versioning.ChainError
			require.True(t, errors.As(err, &ce))
			require.Equal(t, tt.seq, ce.Seq)
			require.Contains(t, ce.Problem, tt.problem)
			require.Contains(t, err.Error(), "versioning: audit chain broken at entry")
		})
	}
}

func TestVerifyChainInPages(t *testing.T) {
	c := chain(7)
	seq, head, err := versioning.VerifyChain(0, versioning.GenesisHash, c[:3])
	require.NoError(t, err)
	seq, head, err = versioning.VerifyChain(seq, head, c[3:])
	require.NoError(t, err)
	require.Equal(t, int64(7), seq)
	require.Equal(t, c[6].Hash, head)
}

func TestLifecycleActions(t *testing.T) {
	for _, a := range []versioning.Action{versioning.ActionPropose, versioning.ActionApprove, versioning.ActionEmergency, versioning.ActionPublish, versioning.ActionRevise, versioning.ActionRenumber} {
		require.True(t, a.Lifecycle(), a)
	}
	for _, a := range []versioning.Action{versioning.ActionLoginFailure, versioning.ActionTokenCreate, "custom"} {
		require.False(t, a.Lifecycle(), a)
	}
	require.Equal(t, []versioning.Role{"a", "b"}, versioning.SplitRoles(versioning.JoinRoles([]versioning.Role{"a", "b"})))
	require.Empty(t, versioning.SplitRoles(""))
}

// TestAuditFilterValidate: a filter value no entry can hold (from a query
// string: ?actor=%00) is bad input naming its field.
func TestAuditFilterValidate(t *testing.T) {
	tests := []struct {
		name   string
		f      versioning.AuditFilter
		fields []string
	}{
		{"empty", versioning.AuditFilter{}, nil},
		{"valid", versioning.AuditFilter{Service: "checkout", Actor: "system:outbox-relay", Action: versioning.ActionLoginFailure}, nil},
		{"other component's action", versioning.AuditFilter{Action: "alert_config.save"}, nil},
		{"bad text", versioning.AuditFilter{Service: "\xff", Actor: "a\x00b", Action: "Login"}, []string{"service", "actor", "action"}},
		{"too long actor", versioning.AuditFilter{Actor: strings.Repeat("a", versioning.MaxActorBytes+1)}, []string{"actor"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.fields, fieldNames(t, tt.f.Validate()))
		})
	}
}

// seedAudit writes n chained entries straight into the rule_audit table
// and moves the head to the last, as n appends would have; each carries a
// detail of about 300 bytes, the size of a proposal's.
func seedAudit(tb testing.TB, h conformance.Harness, n int) {
	tb.Helper()
	ctx := context.Background()
	detail := json.RawMessage(`{"reason":"` + strings.Repeat("r", 200) + `","base":41,"changes":[{"path":"routes.api.rate_limit.rate","old":100,"new":150}]}`)
	prev := versioning.GenesisHash
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	const batch = 1000
	for from := 0; from < n; from += batch {
		var q strings.Builder
		q.WriteString(`INSERT INTO rule_audit (seq, at, actor, roles, action, service, version, detail, prev_hash, hash) VALUES `)
		var args []any
		for i := from; i < min(from+batch, n); i++ {
			e := versioning.AuditEntry{Seq: int64(i + 1), At: at.Add(time.Duration(i) * time.Second), Actor: "alice",
				Roles: []versioning.Role{versioning.RoleOperator}, Action: versioning.ActionPropose, Service: "checkout",
				Version: int64(i + 1), Detail: detail, PrevHash: prev}
			e.Hash = e.ComputeHash()
			prev = e.Hash
			if i > from {
				q.WriteString(", ")
			}
			k := len(args)
			fmt.Fprintf(&q, "($%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d)", k+1, k+2, k+3, k+4, k+5, k+6, k+7, k+8, k+9, k+10)
			args = append(args, e.Seq, e.At, e.Actor, versioning.JoinRoles(e.Roles), string(e.Action), e.Service, e.Version,
				string(e.Detail), e.PrevHash, e.Hash)
		}
		require.NoError(tb, h.Exec(ctx, q.String(), args...))
	}
	require.NoError(tb, h.Exec(ctx, `UPDATE rule_audit_head SET seq = $1, hash = $2 WHERE id = 1`, int64(n), prev))
	require.NoError(tb, h.Exec(ctx, `ANALYZE rule_audit`))
}

// BenchmarkVerifyAudit measures checking the chain of a log of 100,000
// entries: "whole" walks all of it (VerifyAudit, what every view of the
// audit page paid before AuditChecker), "checker" is a view between two
// whole walks (AuditChecker.Check with 10 entries appended since the last
// view).
func BenchmarkVerifyAudit(b *testing.B) {
	const n = 100000
	for _, o := range openers {
		b.Run(o.name+"/entries=100000/whole", func(b *testing.B) {
			ctx := context.Background()
			h := o.open(b)
			seedAudit(b, h, n)
			b.ResetTimer()
			for range b.N {
				rep, err := h.Store.VerifyAudit(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if rep.Entries != n {
					b.Fatalf("verified %d entries, want %d", rep.Entries, n)
				}
			}
		})
		b.Run(o.name+"/entries=100000/checker", func(b *testing.B) {
			ctx := context.Background()
			h := o.open(b)
			seedAudit(b, h, n)
			c := versioning.NewAuditChecker(h.Store, versioning.AuditCheckerOptions{WholeEvery: time.Hour})
			if _, err := c.Check(ctx, false); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				for i := range 10 {
					if _, err := h.Store.RecordAudit(ctx, versioning.AuditRecord{Actor: versioning.Actor{Name: "carol"},
						Action: "bench.entry", Detail: []byte(fmt.Sprintf(`{"i":%d}`, i))}); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				rep, err := c.Check(ctx, false)
				if err != nil {
					b.Fatal(err)
				}
				if rep.Whole || rep.New != 10 {
					b.Fatalf("checked %+v, want 10 new entries and no whole walk", rep)
				}
			}
		})
	}
}

func recordEntries(t *testing.T, a versioning.Auditor, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		_, err := a.RecordAudit(context.Background(), versioning.AuditRecord{Actor: versioning.Actor{Name: "carol"},
			Action: "test.entry", Detail: []byte(fmt.Sprintf(`{"i":%d}`, i))})
		require.NoError(t, err)
	}
}

func requireBrokenAt(t *testing.T, err error, seq int64) {
	t.Helper()
	require.ErrorIs(t, err, versioning.ErrTampered)
	var ce *versioning.ChainError
	require.True(t, errors.As(err, &ce), err)
	require.Equal(t, seq, ce.Seq, ce.Problem)
}

// TestAuditCheckerVerifiesOnlyNewEntriesBetweenWholeWalks: after a whole
// walk, a check verifies the entries appended since and says when the
// whole chain was last verified; once WholeEvery has passed, or on request,
// it walks the whole chain again.
func TestAuditCheckerVerifiesOnlyNewEntriesBetweenWholeWalks(t *testing.T) {
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) {
			ctx := context.Background()
			h := o.open(t)
			recordEntries(t, h.Store, 10)
			clk := clock.NewFake(time.Date(2026, 3, 1, 14, 2, 0, 0, time.UTC))
			c := versioning.NewAuditChecker(h.Store, versioning.AuditCheckerOptions{WholeEvery: 10 * time.Minute, Clock: clk})
			first, err := c.Check(ctx, false)
			require.NoError(t, err)
			require.True(t, first.Whole, "the first check walks the whole chain")
			require.Equal(t, int64(10), first.Entries)
			require.Equal(t, int64(10), first.New)
			require.True(t, clk.Now().Equal(first.WholeAt))

			recordEntries(t, h.Store, 3)
			clk.Advance(time.Minute)
			next, err := c.Check(ctx, false)
			require.NoError(t, err)
			require.False(t, next.Whole)
			require.Equal(t, int64(13), next.Entries)
			require.Equal(t, int64(3), next.New)
			require.True(t, first.WholeAt.Equal(next.WholeAt))
			require.Equal(t, int64(10), next.WholeEntries)
			full, err := h.Store.VerifyAudit(ctx)
			require.NoError(t, err)
			require.Equal(t, full, next.AuditReport)

			asked, err := c.Check(ctx, true)
			require.NoError(t, err)
			require.True(t, asked.Whole, "asked for")
			require.Equal(t, int64(13), asked.WholeEntries)

			clk.Advance(10 * time.Minute)
			due, err := c.Check(ctx, false)
			require.NoError(t, err)
			require.True(t, due.Whole, "the last whole walk is WholeEvery old")
			require.True(t, clk.Now().Equal(due.WholeAt))
		})
	}
}

// TestAuditCheckerReportsAnEditedOldEntryAtTheNextWholeWalk: an old entry
// edited after a whole walk is not seen by the checks between whole walks
// (they read only the new entries and the last verified one); the next
// whole walk reports it, and every check after reports it until a whole
// walk passes.
func TestAuditCheckerReportsAnEditedOldEntryAtTheNextWholeWalk(t *testing.T) {
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) {
			ctx := context.Background()
			h := o.open(t)
			recordEntries(t, h.Store, 10)
			clk := clock.NewFake(time.Date(2026, 3, 1, 14, 2, 0, 0, time.UTC))
			c := versioning.NewAuditChecker(h.Store, versioning.AuditCheckerOptions{WholeEvery: 10 * time.Minute, Clock: clk})
			_, err := c.Check(ctx, false)
			require.NoError(t, err)
			require.NoError(t, h.Tamper(ctx, `UPDATE rule_audit SET actor = 'mallory' WHERE seq = 2`))

			between, err := c.Check(ctx, false)
			require.NoError(t, err, "between whole walks only the last verified entry is read back")
			require.False(t, between.Whole)

			clk.Advance(10 * time.Minute)
			_, err = c.Check(ctx, false)
			requireBrokenAt(t, err, 2)
			clk.Advance(time.Minute)
			_, err = c.Check(ctx, false)
			requireBrokenAt(t, err, 2)
		})
	}
}

// TestAuditCheckerReportsAnEditedOldEntryWhenAskedForTheWholeChain: the
// whole walk on request finds what the checks between whole walks cannot.
func TestAuditCheckerReportsAnEditedOldEntryWhenAskedForTheWholeChain(t *testing.T) {
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) {
			ctx := context.Background()
			h := o.open(t)
			recordEntries(t, h.Store, 10)
			clk := clock.NewFake(time.Date(2026, 3, 1, 14, 2, 0, 0, time.UTC))
			c := versioning.NewAuditChecker(h.Store, versioning.AuditCheckerOptions{Clock: clk})
			_, err := c.Check(ctx, false)
			require.NoError(t, err)
			require.NoError(t, h.Tamper(ctx, `UPDATE rule_audit SET detail = '{"i":99}' WHERE seq = 4`))
			clk.Advance(time.Second)
			_, err = c.Check(ctx, true)
			requireBrokenAt(t, err, 4)
		})
	}
}

// TestAuditCheckerReportsChangesToTheVerifiedEndAtOnce: the checks
// between whole walks read the last verified entry back, so editing it,
// rehashing it, or cutting the log back below it is reported by the next
// check, as is a bad new entry.
func TestAuditCheckerReportsChangesToTheVerifiedEndAtOnce(t *testing.T) {
	tests := []struct {
		name   string
		tamper []string
		seq    int64
	}{
		{"edited", []string{`UPDATE rule_audit SET actor = 'mallory' WHERE seq = 10`}, 10},
		{"rehashed", []string{`UPDATE rule_audit SET hash = 'sha256:` + strings.Repeat("1", 64) + `' WHERE seq = 10`}, 10},
		{"cut back", []string{`DELETE FROM rule_audit WHERE seq > 8`,
			`UPDATE rule_audit_head SET seq = 8, hash = (SELECT hash FROM rule_audit WHERE seq = 8)`}, 9},
		{"bad new entry", []string{`INSERT INTO rule_audit (seq, at, actor, roles, action, service, version, detail, prev_hash, hash)
			SELECT 11, at, 'mallory', roles, action, service, version, detail, hash, hash FROM rule_audit WHERE seq = 10`,
			`UPDATE rule_audit_head SET seq = 11, hash = (SELECT hash FROM rule_audit WHERE seq = 10)`}, 11},
	}
	for _, o := range openers {
		for _, tt := range tests {
			t.Run(o.name+"/"+tt.name, func(t *testing.T) {
				ctx := context.Background()
				h := o.open(t)
				recordEntries(t, h.Store, 10)
				clk := clock.NewFake(time.Date(2026, 3, 1, 14, 2, 0, 0, time.UTC))
				c := versioning.NewAuditChecker(h.Store, versioning.AuditCheckerOptions{Clock: clk})
				_, err := c.Check(ctx, false)
				require.NoError(t, err)
				for _, q := range tt.tamper {
					require.NoError(t, h.Tamper(ctx, q), q)
				}
				clk.Advance(time.Second)
				_, err = c.Check(ctx, false)
				requireBrokenAt(t, err, tt.seq)
			})
		}
	}
}

// wholeOnly is an Auditor that can only walk the whole chain.
type wholeOnly struct {
	versioning.Auditor
	walks int
}

func (w *wholeOnly) VerifyAudit(ctx context.Context) (versioning.AuditReport, error) {
	w.walks++
	return w.Auditor.VerifyAudit(ctx)
}

// TestAuditCheckerWalksTheWholeChainOfAStoreWithoutSpans: an Auditor
// that does not implement AuditSpanVerifier is checked whole every time.
func TestAuditCheckerWalksTheWholeChainOfAStoreWithoutSpans(t *testing.T) {
	ctx := context.Background()
	h := sqliteHarness(t, conformance.Options{})
	recordEntries(t, h.Store, 3)
	w := &wholeOnly{Auditor: h.Store}
	c := versioning.NewAuditChecker(w, versioning.AuditCheckerOptions{})
	for range 2 {
		rep, err := c.Check(ctx, false)
		require.NoError(t, err)
		require.True(t, rep.Whole)
	}
	require.Equal(t, 2, w.walks)
}
