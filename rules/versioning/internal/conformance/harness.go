// Package conformance is the behaviour every versioning.Store must show, run
// against each implementation by TestConformance in package versioning.
package conformance

import (
	"context"
	"testing"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/clock"
)

// Options are what a test asks of a new store.
type Options struct {
	// Clock, if set, is the store's clock.
	Clock clock.Clock
	// BeforeCommit is passed to the store's fault-injection hook.
	BeforeCommit func(op string, attempt int) error
}

// Harness is a fresh, empty store plus privileged access to its database.
type Harness struct {
	Store versioning.Store
	// Exec runs one statement as the database owner (triggers active).
	Exec func(ctx context.Context, query string, args ...any) error
	// Count runs a query returning one integer.
	Count func(ctx context.Context, query string, args ...any) int64
	// Plan returns the database's query plan for a statement, as text.
	Plan func(ctx context.Context, query string, args ...any) string
	// Tamper runs one statement with the audit log's protective triggers
	// out of the way, as an attacker with owner access would.
	Tamper func(ctx context.Context, query string) error
	// AppRole, if set (PostgreSQL), opens a second store on the same
	// database connected as a non-superuser application role with the
	// documented grants, and returns it plus an Exec running as that role.
	AppRole func(t *testing.T) (versioning.Store, func(ctx context.Context, query string) error)
	// Concurrent is true when transactions really run in parallel.
	Concurrent bool
}

// Factory makes a fresh Harness for one test.
type Factory func(t *testing.T, o Options) Harness
