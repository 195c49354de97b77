package distribution

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

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
	Logger    *slog.Logger
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
	conn, err := pgx.Connect(ctx, o.URL)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{o.Channel}.Sanitize()); err != nil {
		return err
	}
	signal()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		signal()
	}
}
