package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"governor.dev/governor/rules/versioning"
)

// Decision kinds a person takes on a proposed version.
const (
	DecisionApprove  = "approve"
	DecisionReject   = "reject"
	DecisionWithdraw = "withdraw"
	DecisionRebase   = "rebase"
)

// AlreadyDecided reports whether cur, a version read again after the store
// refused a decision, already holds that decision: kind by by with comment
// (and, for an approval, of checksum when it is not empty). Then the refused
// request repeated one that was recorded (a second click, a resent form, a
// client's retry after a lost answer), and the person's intent stands.
//
// An approval counts while the version is proposed or since it went live,
// in its current round (a revision drops the approvals given); a rejection
// (withdrawal) counts when the version was rejected (withdrawn) by by.
// Anything else is a real refusal: another comment, a revision since the
// checksum, another person's decision, a rebase.
func AlreadyDecided(cur versioning.Version, kind, by, comment, checksum string) bool {
	switch kind {
	case DecisionApprove:
		return (cur.State == versioning.StateProposed || cur.State.WentLive()) &&
			(checksum == "" || checksum == cur.Checksum) &&
			slices.ContainsFunc(cur.Approvals, func(ap versioning.Approval) bool {
				return versioning.SamePerson(ap.Approver, by) && ap.Comment == comment
			})
	case DecisionReject:
		return cur.State == versioning.StateRejected && versioning.SamePerson(cur.DecidedBy, by) && cur.DecisionComment == comment
	case DecisionWithdraw:
		return cur.State == versioning.StateWithdrawn && versioning.SamePerson(cur.DecidedBy, by) && cur.DecisionComment == comment
	}
	return false
}

// AlreadyRebased reports whether by's rebase of version n of service, which
// the store refused with err, repeats a rebase by made (a second click, a
// resent form, a client's retry after a lost answer), and then returns the
// version that rebase made, as it is now. It is one when all of these hold,
// read again after the refusal:
//
//   - the store refused it because n is no longer proposed
//     (versioning.ErrInvalidState);
//   - n was withdrawn by by (the same person, compared as the store does)
//     with the words the store's rebase gives it, "rebased as version N";
//   - the audit log holds that rebase: a versioning.ActionRebase entry by
//     by for version N, rebased from n;
//   - N is what the rebase made and nothing changed since: still proposed,
//     never revised, without approvals, by n's author, with n's checksum,
//     and still based on the active version.
//
// Anything else is a real refusal, answered with the store's message: a
// withdrawal or rejection that was no rebase, another person's rebase, a
// rebased version revised, approved or closed since, another version gone
// live since (N is stale again: a rebase now would not give N).
func AlreadyRebased(ctx context.Context, st versioning.Store, service string, n int64, by string, err error) (versioning.Version, bool) {
	if !errors.Is(err, versioning.ErrInvalidState) {
		return versioning.Version{}, false
	}
	old, gerr := st.Get(ctx, service, n)
	if gerr != nil || old.State != versioning.StateWithdrawn || !versioning.SamePerson(old.DecidedBy, by) {
		return versioning.Version{}, false
	}
	var to int64
	if _, serr := fmt.Sscanf(old.DecisionComment, "rebased as version %d", &to); serr != nil ||
		to <= n || old.DecisionComment != fmt.Sprintf("rebased as version %d", to) {
		return versioning.Version{}, false
	}
	cur, gerr := st.Get(ctx, service, to)
	if gerr != nil || cur.State != versioning.StateProposed || cur.Revision != 0 || len(cur.Approvals) > 0 ||
		!versioning.SamePerson(cur.Author, old.Author) || cur.Checksum != old.Checksum {
		return versioning.Version{}, false
	}
	active, gerr := st.Active(ctx, service)
	if gerr != nil || active.Number != cur.Parent {
		return versioning.Version{}, false
	}
	return cur, rebaseAudited(ctx, st, service, n, to, by)
}

// rebaseAudited reports whether the audit log holds by's rebase of
// version from of service as version to.
func rebaseAudited(ctx context.Context, st versioning.Store, service string, from, to int64, by string) bool {
	f := versioning.AuditFilter{Service: service, Actor: by, Action: versioning.ActionRebase, Newest: true, Limit: 1000}
	for {
		entries, err := st.Audit(ctx, f)
		if err != nil || len(entries) == 0 {
			return false
		}
		for _, e := range entries {
			if e.Version != to || !versioning.SamePerson(e.Actor, by) {
				continue
			}
			var d struct {
				RebasedFrom int64 `json:"rebased_from"`
			}
			return json.Unmarshal(e.Detail, &d) == nil && d.RebasedFrom == from
		}
		f.BeforeSeq = entries[len(entries)-1].Seq
	}
}
