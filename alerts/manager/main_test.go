package manager

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind (queue
// workers, HTTP servers, the Alertmanager watcher).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
