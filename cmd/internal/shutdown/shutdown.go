// Package shutdown turns SIGINT and SIGTERM into what an operator expects of
// Governor's commands: the first signal asks for a clean stop (the context
// ends and the command drains and closes what it opened); a second one,
// while that stop is still under way, ends the process at once.
package shutdown

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// Notify returns a context that ends at the first SIGINT or SIGTERM, which
// it logs. After it, the next SIGINT or SIGTERM exits the process at once
// with status 128 + the signal's number (130 or 143, what a shell reports
// for a process the signal killed). stop releases the signals and ends the
// context; call it when the command returns.
func Notify(log *slog.Logger) (ctx context.Context, stop func()) {
	return notify(log, os.Exit)
}

func notify(log *slog.Logger, exit func(int)) (context.Context, func()) {
	// Two slots: a quick double Ctrl-C is not lost while the first is
	// being handled.
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var once sync.Once
	stop := func() {
		once.Do(func() {
			signal.Stop(ch)
			close(done)
			cancel()
		})
	}
	go func() {
		select {
		case s := <-ch:
			log.Info("signal received: stopping; send it again to exit at once", "signal", s.String())
			cancel()
		case <-done:
			return
		}
		select {
		case s := <-ch:
			log.Error("second signal: exiting without a clean stop", "signal", s.String())
			exit(Code(s))
		case <-done:
		}
	}()
	return ctx, stop
}

// Code is the exit status of a stop forced by signal s: 128 + its number.
func Code(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 1
}
