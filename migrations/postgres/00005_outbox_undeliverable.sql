-- Outbox rows the relay gave up on (too large for the NATS server, or a
-- payload that is not the row's envelope). rule_outbox.failed_at takes the
-- row out of the claims; rule_outbox_failures keeps why, when and by which
-- relay, and which newer version superseded it, or when a relay put the row
-- back in the claims (the server's max_payload grew). Nothing is deleted: a
-- closed failure stays as history.

-- +goose Up
ALTER TABLE rule_outbox ADD COLUMN failed_at timestamptz;

CREATE TABLE rule_outbox_failures (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    outbox_id     bigint NOT NULL REFERENCES rule_outbox (id),
    service       text NOT NULL,
    version       bigint NOT NULL,
    reason        text NOT NULL,
    error         text NOT NULL,
    size          bigint NOT NULL DEFAULT 0 CHECK (size >= 0),
    max_size      bigint NOT NULL DEFAULT 0 CHECK (max_size >= 0),
    relay         text NOT NULL,
    failed_at     timestamptz NOT NULL,
    superseded_by bigint,
    superseded_at timestamptz,
    requeued_at   timestamptz,
    requeued_by   text,
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
