package embedded

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests: scrape
// loops, timeout watchers, the TSDB's and the query engine's workers. Run
// with crashEnv set, the test binary is instead an engine that crashes
// with its DB open (see TestOpenRemovesTheTempDirOfACrashedRun).
func TestMain(m *testing.M) {
	if os.Getenv(crashEnv) != "" {
		crashWithOpenDB()
	}
	goleak.VerifyTestMain(m)
}
