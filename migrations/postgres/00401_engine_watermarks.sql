-- How far the decision engine has reported what it reports once
-- (engine/evaluate): name "emergency_publish" holds the sequence number of
-- the last emergency audit entry reported. Every replica shares it, so a new
-- leader reports what nobody reported and nothing twice: it moves the mark
-- with a compare-and-set before it reports.

-- +goose Up
CREATE TABLE IF NOT EXISTS governor_engine_watermarks (
    name   text PRIMARY KEY,
    seq    bigint NOT NULL,
    leader text NOT NULL
);

-- +goose Down
DROP TABLE governor_engine_watermarks;
