-- Alert state, history, silences, acknowledgements and the notification log
-- of the alerts subsystem. Times are Unix nanoseconds (bigint) in both
-- dialects; structured values are JSON text.

-- +goose Up
-- The state of every pending, firing or recently resolved alert.
CREATE TABLE alert_states (
    fingerprint text PRIMARY KEY,
    rule        text NOT NULL,
    state       text NOT NULL,
    body        text NOT NULL,
    updated_at  bigint NOT NULL
);

-- Every state change, append-only.
CREATE TABLE alert_history (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    fingerprint text NOT NULL,
    rule        text NOT NULL,
    labels      text NOT NULL,
    from_state  text NOT NULL,
    to_state    text NOT NULL,
    at          bigint NOT NULL
);
CREATE INDEX alert_history_by_fingerprint ON alert_history (fingerprint, id);

CREATE TABLE alert_silences (
    id         text PRIMARY KEY,
    starts_at  bigint NOT NULL,
    ends_at    bigint NOT NULL,
    created_by text NOT NULL,
    comment    text NOT NULL,
    body       text NOT NULL
);

-- Acknowledgements last until the alert firing since starts_at resolves.
CREATE TABLE alert_acks (
    fingerprint text PRIMARY KEY,
    starts_at   bigint NOT NULL,
    acked_by    text NOT NULL,
    comment     text NOT NULL,
    acked_at    bigint NOT NULL
);

-- What each (receiver, group) has notified.
CREATE TABLE alert_groups (
    receiver  text NOT NULL,
    group_key text NOT NULL,
    seq       bigint NOT NULL,
    body      text NOT NULL,
    PRIMARY KEY (receiver, group_key)
);

-- The notification log: one row per message, delivered or not.
CREATE TABLE alert_notifications (
    id           text PRIMARY KEY,
    receiver     text NOT NULL,
    group_key    text NOT NULL,
    kind         text NOT NULL,
    body         text NOT NULL,
    created_at   bigint NOT NULL,
    delivered_at bigint,
    attempts     bigint NOT NULL DEFAULT 0,
    last_error   text NOT NULL DEFAULT ''
);
CREATE INDEX alert_notifications_undelivered ON alert_notifications (delivered_at, created_at);

-- +goose Down
DROP TABLE alert_notifications;
DROP TABLE alert_groups;
DROP TABLE alert_acks;
DROP TABLE alert_silences;
DROP TABLE alert_history;
DROP TABLE alert_states;
