package distribution

import (
	"fmt"
	"time"

	"governor.dev/governor/sdk/watch"
)

// State is an instance's delivery state.
type State string

// Delivery states.
const (
	// StateSynced: the instance runs the version meant for it.
	StateSynced State = "SYNCED"
	// StatePending: behind, but the version was published less than the
	// grace period ago.
	StatePending State = "PENDING"
	// StateStale: behind for longer than the grace period.
	StateStale State = "STALE"
	// StateNacked: the instance refused the version meant for it, or runs
	// other content under its number (NackOtherContent).
	StateNacked State = "NACKED"
	// StateGone: no heartbeat for longer than the gone period.
	StateGone State = "GONE"
	// StateUnpublished: no version is meant for the instance: none was
	// ever published for its service (a new service, or a misspelt
	// service name), or only a canary is staged and it does not select
	// the instance. The instance runs the SDK defaults, not approved
	// rules, so it is never counted as SYNCED; its target is 0. One that
	// says it runs a version all the same (the ledger's records or the
	// bucket were reset, or another service's rules reached it) is
	// UNPUBLISHED as well, with Running set and a transition detail
	// naming the version.
	StateUnpublished State = "UNPUBLISHED"
)

// NackOtherContent is the NACK reason (Instance.NackReason) the ledger
// records for an instance that runs the version meant for it with other
// content than the rules store has under that number: the checksum it
// reports (watch.Report.RunningChecksum, watch.Heartbeat.RunningChecksum)
// is not the store's (LedgerOptions.Checksum). Such an instance is NACKED,
// not SYNCED, with the error "runs other content of version N: checksum
// X, published Y", followed by the instance's own refusal of the published
// content when it reported one ("; refused it: apply: ..."). The record
// lasts while the instance runs that version and reports other content; a
// message with the store's checksum, or with another version running,
// clears it. Messages without a checksum (SDKs older than the field)
// leave it as it is.
const NackOtherContent = "other_content"

// States lists the states in display order.
var States = [...]State{StateSynced, StatePending, StateStale, StateNacked, StateGone, StateUnpublished}

// Target is what a service should run: the stable version, and a canary
// version for the instances its selector picks.
type Target struct {
	Service  string
	Stable   int64
	StableAt time.Time
	// Canary is 0 when no version is staged.
	Canary   int64
	CanaryAt time.Time
	Selector *watch.Selector
}

// For returns the version meant for an instance and when it was published.
func (t Target) For(instance string, labels map[string]string) (int64, time.Time) {
	if t.Canary > t.Stable && t.Selector != nil && t.Selector.Selects(t.Service, instance, labels) {
		return t.Canary, t.CanaryAt
	}
	return t.Stable, t.StableAt
}

// Instance is the ledger's record of one SDK instance.
type Instance struct {
	Service  string            `json:"service"`
	Instance string            `json:"instance"`
	Labels   map[string]string `json:"labels,omitempty"`
	// Running is the version the instance last said it runs.
	Running int64 `json:"running"`
	// Target is the version meant for it when the state was last evaluated.
	Target int64     `json:"target"`
	State  State     `json:"state"`
	Since  time.Time `json:"since"`
	// LastSeen is the time of the last heartbeat or report.
	LastSeen time.Time `json:"last_seen"`
	// MessageAt is the time the instance sent (watch.Report.At,
	// watch.Heartbeat.At, on the instance's clock) the newest message whose
	// Running, Labels and NACK were recorded; zero if unknown. An older
	// message, handled late, only refreshes LastSeen (the instance is
	// alive), HeartbeatMS and AckVersion.
	MessageAt time.Time `json:"message_at,omitzero"`
	// HeartbeatMS is the instance's heartbeat period (0 if unknown).
	HeartbeatMS int64 `json:"heartbeat_ms"`
	// AckVersion is the last version acknowledged.
	AckVersion int64 `json:"ack_version"`
	// The last NACK: version (0 if the payload did not say), reason, error.
	NackVersion int64     `json:"nack_version"`
	NackReason  string    `json:"nack_reason,omitempty"`
	NackError   string    `json:"nack_error,omitempty"`
	NackAt      time.Time `json:"nack_at,omitzero"`
}

// Transition is one change of an instance's state.
type Transition struct {
	Service  string    `json:"service"`
	Instance string    `json:"instance"`
	From     State     `json:"from"`
	To       State     `json:"to"`
	Target   int64     `json:"target"`
	Running  int64     `json:"running"`
	Detail   string    `json:"detail,omitempty"`
	At       time.Time `json:"at"`
}

// rules of evaluation, fixed by the Ledger's options.
type evaluator struct {
	grace     time.Duration
	goneAfter time.Duration
	goneBeats int
}

// evaluate returns the instance's state at now against the target. deaf
// is the last time the ledger could not hear or record the instances (its
// start, a NATS disconnection, a store failure): an instance silent for the
// gone period becomes GONE only if the ledger was listening for all of it,
// so an outage of the ledger's own does not make the whole fleet GONE. An
// instance already GONE stays GONE while it is silent. An instance no
// version is meant for (want 0) is UNPUBLISHED, whatever it runs.
func (e evaluator) evaluate(in *Instance, t Target, now, deaf time.Time) (State, int64, string) {
	want, at := t.For(in.Instance, in.Labels)
	gone := e.goneAfter
	if in.HeartbeatMS > 0 {
		gone = max(gone, time.Duration(e.goneBeats)*time.Duration(in.HeartbeatMS)*time.Millisecond)
	}
	switch {
	case now.Sub(in.LastSeen) > gone && (in.State == StateGone || now.Sub(deaf) > gone):
		return StateGone, want, "no heartbeat since " + in.LastSeen.UTC().Format(time.RFC3339)
	case want != 0 && in.Running == want && in.NackReason == NackOtherContent && in.NackVersion == want:
		return StateNacked, want, in.NackError
	case want == 0:
		return StateUnpublished, 0, unpublished(in, t)
	case in.Running == want:
		return StateSynced, want, ""
	case in.NackVersion == want || (in.NackVersion == 0 && !in.NackAt.IsZero() && !in.NackAt.Before(at)):
		return StateNacked, want, in.NackError
	case now.Sub(at) > e.grace:
		return StateStale, want, ""
	}
	return StatePending, want, ""
}

// unpublished says why no version is meant for an instance (want 0) and
// what it runs all the same.
func unpublished(in *Instance, t Target) string {
	why := "no version published for the service"
	if t.Canary > 0 {
		why = fmt.Sprintf("no stable version published (canary v%d does not select the instance)", t.Canary)
	}
	if in.Running != 0 {
		return fmt.Sprintf("runs v%d, but %s", in.Running, why)
	}
	return why + ": runs the SDK defaults"
}
