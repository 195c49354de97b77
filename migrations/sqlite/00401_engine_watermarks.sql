-- How far the decision engine has reported what it reports once
-- (engine/evaluate): name "emergency_publish" holds the sequence number of
-- the last emergency audit entry reported, so a restarted engine reports
-- what was published while it was down, and nothing twice.

-- +goose Up
CREATE TABLE IF NOT EXISTS governor_engine_watermarks (
    name   text PRIMARY KEY,
    seq    integer NOT NULL,
    leader text NOT NULL
);

-- +goose Down
DROP TABLE governor_engine_watermarks;
