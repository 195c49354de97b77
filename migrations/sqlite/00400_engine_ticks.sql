-- The decision engine's evaluation ticks (engine/leader). SQLite mode is
-- single-node (leader.Local claims ticks in memory), so nothing writes this
-- table there; it exists so both dialects have the same schema. Times are
-- RFC 3339 text.

-- +goose Up
CREATE TABLE IF NOT EXISTS governor_engine_ticks (
    tick       text PRIMARY KEY,
    leader     text NOT NULL,
    claimed_at text NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

-- +goose Down
DROP TABLE governor_engine_ticks;
