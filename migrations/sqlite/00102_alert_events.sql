-- Engine events a standby replica observed, for the leading replica's
-- alerts manager to evaluate: it takes (deletes) them at its next step.
-- body is the event as JSON; at is its time in Unix nanoseconds.

-- +goose Up
CREATE TABLE alert_events (
    id   INTEGER PRIMARY KEY AUTOINCREMENT,
    at   INTEGER NOT NULL,
    body TEXT NOT NULL
);

-- +goose Down
DROP TABLE alert_events;
