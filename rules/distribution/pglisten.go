package distribution

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"governor.dev/governor/rules/versioning/postgres"
)

// ListenOptions configure ListenPostgres.
type ListenOptions struct {
	// URL of the PostgreSQL database holding the outbox; required.
	URL string
	// Channel to LISTEN on; default postgres.OutboxChannel
	// ("governor_outbox"), which the rules store NOTIFYs after every
	// transaction that writes an outbox row.
	Channel string
	// RetryWait between connection attempts; default 1s.
	RetryWait time.Duration
	// Check is how long the listener waits for a notification before it
	// checks that its connection still answers (a ping, bounded by Check),
	// and the connect timeout when the URL sets none; default 30s. A
	// connection a failover left half-open hears nothing, and reports
	// nothing, until TCP keepalive gives up (minutes): the relay then woke
	// only at its sweeps.
	Check  time.Duration
	Logger *slog.Logger
}

// ListenPostgres wakes a relay in another process than the rules store: it
// LISTENs on the outbox channel and sends a (coalesced, never blocking)
// value on the returned channel for every NOTIFY, and once after every
// (re)connection in case one was missed while disconnected. Pass the channel
// as RelayOptions.Wake. It stops when ctx ends.
func ListenPostgres(ctx context.Context, o ListenOptions) <-chan struct{} {
	if o.Channel == "" {
		o.Channel = postgres.OutboxChannel
	}
	if o.RetryWait <= 0 {
		o.RetryWait = time.Second
	}
	if o.Check <= 0 {
		o.Check = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	wake := make(chan struct{}, 1)
	signal := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	go func() {
		for ctx.Err() == nil {
			err := listen(ctx, o, signal)
			if ctx.Err() != nil {
				return
			}
			o.Logger.LogAttrs(ctx, slog.LevelWarn, "outbox listener disconnected", slog.String("channel", o.Channel), slog.Any("err", err))
			t := time.NewTimer(o.RetryWait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()
	return wake
}

func listen(ctx context.Context, o ListenOptions, signal func()) error {
	cfg, err := pgx.ParseConfig(o.URL)
	if err != nil {
		return err
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = o.Check
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{o.Channel}.Sanitize()); err != nil {
		return err
	}
	signal()
	for {
		wctx, cancel := context.WithTimeout(ctx, o.Check)
		_, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			signal()
		case ctx.Err() != nil || !pgconn.Timeout(err):
			return err
		default:
			// Quiet for Check: make sure the connection still answers.
			pctx, cancel := context.WithTimeout(ctx, o.Check)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("connection quiet for %s does not answer a ping: %w", o.Check, err)
			}
		}
	}
}
