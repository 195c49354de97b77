-- Versions of the alerting document (alerts/config) saved by admins in the
-- web UI. The newest one supersedes the engine's configuration file; rows
-- are never updated. Times are Unix nanoseconds.

-- +goose Up
CREATE TABLE alert_config_versions (
    number     bigint PRIMARY KEY,
    document   text NOT NULL,
    author     text NOT NULL,
    comment    text NOT NULL,
    created_at bigint NOT NULL
);

-- +goose Down
DROP TABLE alert_config_versions;
