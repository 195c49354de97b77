-- Rule versions, approvals, the hash-chained audit log and the outbox.
-- Times are TIMESTAMP columns holding the driver's text format.

-- +goose Up
CREATE TABLE rule_services (
    name               TEXT PRIMARY KEY,
    last_number        INTEGER NOT NULL DEFAULT 0,
    active_number      INTEGER,
    approvals_required INTEGER NOT NULL DEFAULT 1 CHECK (approvals_required BETWEEN 1 AND 10),
    approver_roles     TEXT NOT NULL DEFAULT 'approver,admin',
    manual_only        INTEGER NOT NULL DEFAULT 0,
    policy_updated_at  TIMESTAMP,
    policy_updated_by  TEXT,
    created_at         TIMESTAMP NOT NULL
) WITHOUT ROWID;

CREATE TABLE rule_versions (
    service          TEXT NOT NULL REFERENCES rule_services (name),
    number           INTEGER NOT NULL CHECK (number > 0),
    parent           INTEGER,
    state            TEXT NOT NULL CHECK (state IN
                         ('proposed', 'approved', 'published', 'superseded', 'rejected', 'withdrawn')),
    content          TEXT NOT NULL,
    checksum         TEXT NOT NULL,
    author           TEXT NOT NULL,
    source           TEXT NOT NULL,
    reason           TEXT NOT NULL,
    evidence         TEXT,
    rollback_of      INTEGER,
    emergency        INTEGER NOT NULL DEFAULT 0,
    auto_applied     INTEGER NOT NULL DEFAULT 0,
    created_at       TIMESTAMP NOT NULL,
    decided_at       TIMESTAMP,
    decided_by       TEXT,
    decision_comment TEXT,
    activated_at     TIMESTAMP,
    superseded_at    TIMESTAMP,
    published_at     TIMESTAMP,
    PRIMARY KEY (service, number)
) WITHOUT ROWID;

CREATE INDEX rule_versions_proposed ON rule_versions (service, number) WHERE state = 'proposed';

CREATE TABLE rule_approvals (
    service  TEXT NOT NULL,
    number   INTEGER NOT NULL,
    approver TEXT NOT NULL,
    comment  TEXT NOT NULL DEFAULT '',
    at       TIMESTAMP NOT NULL,
    PRIMARY KEY (service, number, approver),
    FOREIGN KEY (service, number) REFERENCES rule_versions (service, number)
) WITHOUT ROWID;

CREATE TABLE rule_audit (
    seq       INTEGER PRIMARY KEY CHECK (seq > 0),
    at        TIMESTAMP NOT NULL,
    actor     TEXT NOT NULL,
    roles     TEXT NOT NULL,
    action    TEXT NOT NULL,
    service   TEXT NOT NULL DEFAULT '',
    version   INTEGER NOT NULL DEFAULT 0,
    detail    TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash      TEXT NOT NULL
);

CREATE INDEX rule_audit_service ON rule_audit (service, seq);

CREATE TABLE rule_audit_head (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    seq  INTEGER NOT NULL,
    hash TEXT NOT NULL
);
INSERT INTO rule_audit_head (id, seq, hash)
VALUES (1, 0, 'sha256:0000000000000000000000000000000000000000000000000000000000000000');

CREATE TABLE rule_outbox (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    service      TEXT NOT NULL,
    version      INTEGER NOT NULL,
    kind         TEXT NOT NULL,
    checksum     TEXT NOT NULL,
    payload      TEXT NOT NULL,
    created_at   TIMESTAMP NOT NULL,
    lease_until  TIMESTAMP,
    attempts     INTEGER NOT NULL DEFAULT 0,
    published_at TIMESTAMP,
    UNIQUE (service, version),
    FOREIGN KEY (service, version) REFERENCES rule_versions (service, number)
);

CREATE INDEX rule_outbox_pending ON rule_outbox (id) WHERE published_at IS NULL;

-- +goose StatementBegin
CREATE TRIGGER rule_audit_no_update BEFORE UPDATE ON rule_audit
BEGIN
    SELECT RAISE(ABORT, 'rule_audit is append-only: UPDATE refused');
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER rule_audit_no_delete BEFORE DELETE ON rule_audit
BEGIN
    SELECT RAISE(ABORT, 'rule_audit is append-only: DELETE refused');
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER rule_versions_no_delete BEFORE DELETE ON rule_versions
BEGIN
    SELECT RAISE(ABORT, 'rule_versions rows are never deleted');
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER rule_versions_immutable BEFORE UPDATE OF
    service, number, parent, content, checksum, author, source, reason, evidence, rollback_of, created_at
    ON rule_versions
BEGIN
    SELECT RAISE(ABORT, 'rule_versions content is immutable');
END;
-- +goose StatementEnd

-- +goose Down
DROP TABLE rule_outbox;
DROP TABLE rule_audit_head;
DROP TABLE rule_audit;
DROP TABLE rule_approvals;
DROP TABLE rule_versions;
DROP TABLE rule_services;
