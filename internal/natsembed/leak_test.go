package natsembed

import (
	"testing"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"
)

func TestCloseLeavesNoGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
