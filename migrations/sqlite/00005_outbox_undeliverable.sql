-- Outbox rows the relay gave up on (too large for the NATS server, or a
-- payload that is not the row's envelope). rule_outbox.failed_at takes the
-- row out of the claims; rule_outbox_failures keeps why, when and by which
-- relay, and which newer version superseded it, or when a relay put the row
-- back in the claims (the server's max_payload grew). Nothing is deleted: a
-- closed failure stays as history.

-- +goose Up
ALTER TABLE rule_outbox ADD COLUMN failed_at TIMESTAMP;

CREATE TABLE rule_outbox_failures (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    outbox_id     INTEGER NOT NULL REFERENCES rule_outbox (id),
    service       TEXT NOT NULL,
    version       INTEGER NOT NULL,
    reason        TEXT NOT NULL,
    error         TEXT NOT NULL,
    size          INTEGER NOT NULL DEFAULT 0 CHECK (size >= 0),
    max_size      INTEGER NOT NULL DEFAULT 0 CHECK (max_size >= 0),
    relay         TEXT NOT NULL,
    failed_at     TIMESTAMP NOT NULL,
    superseded_by INTEGER,
    superseded_at TIMESTAMP,
    requeued_at   TIMESTAMP,
    requeued_by   TEXT,
    CHECK ((superseded_by IS NULL) = (superseded_at IS NULL)),
    CHECK ((requeued_at IS NULL) = (requeued_by IS NULL))
);

-- At most one open failure per outbox row.
CREATE UNIQUE INDEX rule_outbox_failures_open_row ON rule_outbox_failures (outbox_id)
    WHERE superseded_at IS NULL AND requeued_at IS NULL;
CREATE INDEX rule_outbox_failures_service ON rule_outbox_failures (service, failed_at);

DROP INDEX rule_outbox_pending;
CREATE INDEX rule_outbox_pending ON rule_outbox (id) WHERE published_at IS NULL AND failed_at IS NULL;

-- +goose Down
DROP INDEX rule_outbox_pending;
CREATE INDEX rule_outbox_pending ON rule_outbox (id) WHERE published_at IS NULL;
DROP TABLE rule_outbox_failures;
ALTER TABLE rule_outbox DROP COLUMN failed_at;
