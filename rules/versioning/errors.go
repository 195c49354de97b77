package versioning

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"governor.dev/governor/sdk/rules"
)

// Sentinel errors. Every error of a Store wraps exactly one of them.
var (
	// ErrNotFound: no such service, version or outbox row.
	ErrNotFound = errors.New("versioning: not found")
	// ErrConflict: the state an action was decided against changed: the
	// proposal's base is no longer the active version, the reviewed
	// ruleset was revised, or the version a rollback was decided against
	// is no longer active (*ConflictError).
	ErrConflict = errors.New("versioning: conflict")
	// ErrSelfApproval: the author tried to approve their own proposal.
	ErrSelfApproval = errors.New("versioning: self-approval refused")
	// ErrForbidden: the actor lacks a role the action needs.
	ErrForbidden = errors.New("versioning: forbidden")
	// ErrInvalidState: the version is not in a state that allows the action
	// (e.g. approving a version that another approver just approved).
	ErrInvalidState = errors.New("versioning: invalid state")
	// ErrInvalid: bad input; the error is an *InputError naming the fields.
	ErrInvalid = errors.New("versioning: invalid input")
	// ErrTampered: the audit chain does not verify; see *ChainError.
	ErrTampered = errors.New("versioning: audit chain broken")
	// ErrUnavailable: the database failed or timed out.
	ErrUnavailable = errors.New("versioning: store unavailable")
	// ErrFenced: a write made under a Fence whose tick is older than one
	// claimed since (the writer no longer leads); see *FencedError.
	ErrFenced = errors.New("versioning: fenced")
)

// InputError lists every problem with the input of one operation, each naming
// its field ("reason", "ruleset.routes[0].rate_limit.rate").
type InputError struct {
	Errors []rules.FieldError `json:"errors"`
}

func (e *InputError) Error() string {
	parts := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		if fe.Field == "" {
			parts[i] = fe.Problem
		} else {
			parts[i] = fe.Error()
		}
	}
	return ErrInvalid.Error() + ": " + strings.Join(parts, "; ")
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *InputError) Unwrap() error { return ErrInvalid }

// invalid builds an *InputError with one field.
func invalid(field, format string, args ...any) *InputError {
	return &InputError{Errors: []rules.FieldError{{Field: field, Problem: fmt.Sprintf(format, args...)}}}
}

// rulesetError turns a rules decoding or validation error into an
// *InputError whose fields carry the prefix (e.g. "ruleset.").
func rulesetError(prefix string, err error) error {
	var ve *rules.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, strings.TrimSuffix(prefix, "."), err)
	}
	out := &InputError{Errors: make([]rules.FieldError, len(ve.Errors))}
	for i, fe := range ve.Errors {
		f := prefix + fe.Field
		if fe.Field == "" {
			f = strings.TrimSuffix(prefix, ".")
		}
		out.Errors[i] = rules.FieldError{Field: f, Problem: fe.Problem}
	}
	return out
}

// ChainError names the first audit entry that does not verify.
type ChainError struct {
	// Seq is the entry's sequence number.
	Seq     int64
	Problem string
}

func (e *ChainError) Error() string {
	return fmt.Sprintf("%s at entry %d: %s", ErrTampered, e.Seq, e.Problem)
}

// Unwrap makes errors.Is(err, ErrTampered) true.
func (e *ChainError) Unwrap() error { return ErrTampered }

// ConflictError is the conflict of a write that named the version it
// expected to be active (Store.RollbackFrom) while another one is: nothing
// was written. Action is what was refused ("roll back checkout to version
// 1").
type ConflictError struct {
	Service string
	Action  string
	// Expected is the version the caller decided against; Active the one
	// that is active instead.
	Expected, Active int64
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s: %s: version %d is active, not the expected version %d",
		ErrConflict, e.Action, e.Active, e.Expected)
}

// Unwrap makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// FencedError is the refusal of a write made under a Fence (WithFence)
// after a later tick was claimed: the writer no longer leads, and nothing
// was written.
type FencedError struct {
	// Fence is the writer's: its tick and its identity.
	Fence Fence
	// Newer is the newest tick claimed, by By.
	Newer time.Time
	By    string
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("%s: %s not leading any more: tick %s is older than tick %s claimed by %s",
		ErrFenced, e.Fence.Holder, e.Fence.Tick.UTC().Format(time.RFC3339Nano), e.Newer.UTC().Format(time.RFC3339Nano), e.By)
}

// Unwrap makes errors.Is(err, ErrFenced) true.
func (e *FencedError) Unwrap() error { return ErrFenced }

// NewerTickQuery reads the newest tick claimed after $1 (a fence's tick,
// UTC) in governor_engine_ticks and the replica that claimed it: the
// Newer and By of a FencedError. No row: no later tick, the fence holds.
const NewerTickQuery = `SELECT tick, leader FROM governor_engine_ticks WHERE tick > $1 ORDER BY tick DESC LIMIT 1`
