package postgres_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves goroutines behind (pool
// health checks, listeners, retries).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
