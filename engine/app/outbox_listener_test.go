package app

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"governor.dev/governor/internal/testenv"
)

// TestClosedAppLeavesNoOutboxListener: an App made with a context that
// outlives it (context.Background, as an embedding program or a test does)
// must stop its Postgres outbox listener when it closes; it used to hold a
// connection and reconnect forever after the stores were closed.
func TestClosedAppLeavesNoOutboxListener(t *testing.T) {
	cfg := testConfig(t)
	cfg.Database = testenv.Postgres(t)
	cfg.NATS.URL = testenv.NATS(t)
	cfg.NATS.Prefix = fmt.Sprintf("leak%d", time.Now().UnixNano())
	before := goleak.IgnoreCurrent()
	a, err := New(context.Background(), Options{Config: cfg, Registry: prometheus.NewRegistry(), BcryptCost: 4})
	if err != nil {
		t.Fatal(err)
	}
	a.close()
	goleak.VerifyNone(t, before)
}
