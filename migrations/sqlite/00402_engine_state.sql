-- The decision engine's state (engine/evaluate, State): what the leader
-- learned and reported, so a new leader continues where it stopped. One row
-- per part and key: "events" (key ''), the alert levels crossed, breakers
-- open and instances in a bad state; "baseline" (key: service), a service's
-- healthy baseline; "downstream" (key: service/downstream), a downstream's
-- p99 baseline and anomaly detector. format is the encoding's version (rows
-- of another are ignored), at_ns the cycle that wrote the row (Unix
-- nanoseconds; a row never replaces a newer one), leader the replica.

-- +goose Up
CREATE TABLE IF NOT EXISTS governor_engine_state (
    part   text    NOT NULL,
    key    text    NOT NULL,
    format integer NOT NULL,
    at_ns  integer NOT NULL,
    leader text    NOT NULL,
    data   blob    NOT NULL,
    PRIMARY KEY (part, key)
);

-- +goose Down
DROP TABLE governor_engine_state;
