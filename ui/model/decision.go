package model

import (
	"slices"

	"governor.dev/governor/rules/versioning"
)

// Decision kinds a person takes on a proposed version.
const (
	DecisionApprove  = "approve"
	DecisionReject   = "reject"
	DecisionWithdraw = "withdraw"
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
