package embedded

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests: scrape
// loops, timeout watchers, the TSDB's and the query engine's workers.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
