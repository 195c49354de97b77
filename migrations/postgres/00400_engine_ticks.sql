-- The decision engine's evaluation ticks (engine/leader): the leader claims
-- each tick through its lock-holding connection with INSERT ... ON CONFLICT
-- DO NOTHING, so a tick a dying leader evaluated is never evaluated again by
-- its successor. IF NOT EXISTS adopts the table engines created themselves
-- before this migration existed.

-- +goose Up
CREATE TABLE IF NOT EXISTS governor_engine_ticks (
    tick       timestamptz PRIMARY KEY,
    leader     text NOT NULL,
    claimed_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE governor_engine_ticks;
