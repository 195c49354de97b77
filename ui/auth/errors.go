package auth

import (
	"errors"
	"fmt"
)

// Sentinel errors; every error of this package wraps one of them.
var (
	// ErrUnauthenticated: no valid session or token, or a wrong password.
	ErrUnauthenticated = errors.New("auth: unauthenticated")
	// ErrForbidden: the principal lacks a role the action needs.
	ErrForbidden = errors.New("auth: forbidden")
	// ErrThrottled: too many login attempts; try again later.
	ErrThrottled = errors.New("auth: too many attempts")
	// ErrCSRF: a state-changing browser request without a valid CSRF token.
	ErrCSRF = errors.New("auth: missing or invalid CSRF token")
	// ErrInvalid: bad input (user name, password, role, scope).
	ErrInvalid = errors.New("auth: invalid input")
	// ErrExists: a user with that name, ignoring case, already exists.
	ErrExists = errors.New("auth: already exists")
	// ErrNotFound: no such user or token.
	ErrNotFound = errors.New("auth: not found")
	// ErrLastAdmin: the change would leave no user with the admin role,
	// and so nobody to manage users. It wraps ErrInvalid.
	ErrLastAdmin = fmt.Errorf("%w: no admin would be left", ErrInvalid)
	// ErrUnavailable: the database failed.
	ErrUnavailable = errors.New("auth: store unavailable")
)
