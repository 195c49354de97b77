package watch_test

import (
	"context"
	"log"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/watch"
)

// The SDK's Governor is what a watcher applies versions to.
var _ watch.Applier = (*governor.Governor)(nil)

// A service follows the rules the control plane publishes for it. It starts
// on its cached last-known-good rules even when NATS is down.
func Example() {
	reg := prometheus.NewRegistry()
	g, err := governor.New(governor.Options{Service: "checkout", Registerer: reg})
	if err != nil {
		log.Fatal(err)
	}
	nc, err := watch.Connect("nats://nats-1:4222,nats://nats-2:4222",
		nats.UserCredentials("/etc/governor/checkout.creds"))
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	w, err := watch.New(watch.Options{
		Service:    "checkout",
		Instance:   "checkout-7f9c-abcde",
		Labels:     map[string]string{"zone": "eu-west-1a", "version": "1.42.0"},
		Conn:       nc,
		Applier:    g,
		CacheFile:  "/var/lib/checkout/governor-rules.json",
		Registerer: reg,
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	go func() { _ = w.Run(ctx) }()
	// ... serve traffic through g ...
}
