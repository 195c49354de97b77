package alerts

import "errors"

// Sentinel errors. Every package of the alerts tree wraps one of them with %w
// and a message naming the field and the problem.
var (
	// ErrInvalid marks refused input: a bad rule, matcher, silence, route or receiver.
	ErrInvalid = errors.New("alerts: invalid input")
	// ErrNotFound marks a missing alert, silence or receiver.
	ErrNotFound = errors.New("alerts: not found")
	// ErrStore marks a failure of the persistence layer.
	ErrStore = errors.New("alerts: store failed")
	// ErrConflict marks a write refused because what it was based on
	// changed since it was read (a silence edited through another replica).
	ErrConflict = errors.New("alerts: conflict")
	// ErrClosed marks use of a closed component.
	ErrClosed = errors.New("alerts: closed")
)
