-- Engine events a standby replica observed, for the leading replica's
-- alerts manager to evaluate: it takes (deletes) them at its next step.
-- body is the event as JSON; at is its time in Unix nanoseconds.

-- +goose Up
CREATE TABLE alert_events (
    id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at   bigint NOT NULL,
    body text NOT NULL
);

-- +goose Down
DROP TABLE alert_events;
