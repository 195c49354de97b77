-- Rule versions, approvals, the hash-chained audit log and the outbox.

-- +goose Up
CREATE TABLE rule_services (
    name               text PRIMARY KEY,
    last_number        bigint NOT NULL DEFAULT 0,
    active_number      bigint,
    approvals_required integer NOT NULL DEFAULT 1 CHECK (approvals_required BETWEEN 1 AND 10),
    approver_roles     text NOT NULL DEFAULT 'approver,admin',
    manual_only        boolean NOT NULL DEFAULT false,
    policy_updated_at  timestamptz,
    policy_updated_by  text,
    created_at         timestamptz NOT NULL
);

CREATE TABLE rule_versions (
    service          text NOT NULL REFERENCES rule_services (name),
    number           bigint NOT NULL CHECK (number > 0),
    parent           bigint,
    state            text NOT NULL CHECK (state IN
                         ('proposed', 'approved', 'published', 'superseded', 'rejected', 'withdrawn')),
    content          text NOT NULL,
    checksum         text NOT NULL,
    author           text NOT NULL,
    source           text NOT NULL,
    reason           text NOT NULL,
    evidence         text,
    rollback_of      bigint,
    emergency        boolean NOT NULL DEFAULT false,
    auto_applied     boolean NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL,
    decided_at       timestamptz,
    decided_by       text,
    decision_comment text,
    activated_at     timestamptz,
    superseded_at    timestamptz,
    published_at     timestamptz,
    PRIMARY KEY (service, number)
);

-- Pending proposals across all services, for review queues.
CREATE INDEX rule_versions_proposed ON rule_versions (service, number) WHERE state = 'proposed';

CREATE TABLE rule_approvals (
    service  text NOT NULL,
    number   bigint NOT NULL,
    approver text NOT NULL,
    comment  text NOT NULL DEFAULT '',
    at       timestamptz NOT NULL,
    PRIMARY KEY (service, number, approver),
    FOREIGN KEY (service, number) REFERENCES rule_versions (service, number)
);

CREATE TABLE rule_audit (
    seq       bigint PRIMARY KEY CHECK (seq > 0),
    at        timestamptz NOT NULL,
    actor     text NOT NULL,
    roles     text NOT NULL,
    action    text NOT NULL,
    service   text NOT NULL DEFAULT '',
    version   bigint NOT NULL DEFAULT 0,
    detail    text NOT NULL,
    prev_hash text NOT NULL,
    hash      text NOT NULL
);

CREATE INDEX rule_audit_service ON rule_audit (service, seq);

-- The chain head: one row, locked by every append, so entries are numbered
-- and chained in commit order.
CREATE TABLE rule_audit_head (
    id   integer PRIMARY KEY CHECK (id = 1),
    seq  bigint NOT NULL,
    hash text NOT NULL
);
INSERT INTO rule_audit_head (id, seq, hash)
VALUES (1, 0, 'sha256:0000000000000000000000000000000000000000000000000000000000000000');

CREATE TABLE rule_outbox (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    service      text NOT NULL,
    version      bigint NOT NULL,
    kind         text NOT NULL,
    checksum     text NOT NULL,
    payload      text NOT NULL,
    created_at   timestamptz NOT NULL,
    lease_until  timestamptz,
    attempts     integer NOT NULL DEFAULT 0,
    published_at timestamptz,
    UNIQUE (service, version),
    FOREIGN KEY (service, version) REFERENCES rule_versions (service, number)
);

CREATE INDEX rule_outbox_pending ON rule_outbox (id) WHERE published_at IS NULL;

-- The audit log is append-only for everyone, owner included: rows can be
-- inserted, never changed or removed.
-- +goose StatementBegin
CREATE FUNCTION rule_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'rule_audit is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER rule_audit_no_update BEFORE UPDATE OR DELETE ON rule_audit
    FOR EACH ROW EXECUTE FUNCTION rule_audit_append_only();
CREATE TRIGGER rule_audit_no_truncate BEFORE TRUNCATE ON rule_audit
    FOR EACH STATEMENT EXECUTE FUNCTION rule_audit_append_only();

-- A version's content and provenance never change once written.
-- +goose StatementBegin
CREATE FUNCTION rule_versions_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'rule_versions rows are never deleted'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NEW.service IS DISTINCT FROM OLD.service OR NEW.number IS DISTINCT FROM OLD.number
       OR NEW.parent IS DISTINCT FROM OLD.parent OR NEW.content IS DISTINCT FROM OLD.content
       OR NEW.checksum IS DISTINCT FROM OLD.checksum OR NEW.author IS DISTINCT FROM OLD.author
       OR NEW.source IS DISTINCT FROM OLD.source OR NEW.reason IS DISTINCT FROM OLD.reason
       OR NEW.evidence IS DISTINCT FROM OLD.evidence OR NEW.rollback_of IS DISTINCT FROM OLD.rollback_of
       OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        RAISE EXCEPTION 'rule_versions content is immutable'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER rule_versions_immutable BEFORE UPDATE OR DELETE ON rule_versions
    FOR EACH ROW EXECUTE FUNCTION rule_versions_immutable();

-- Applications connect with a role that may read and append, never rewrite.
REVOKE UPDATE, DELETE, TRUNCATE ON rule_audit FROM PUBLIC;

-- +goose Down
DROP TABLE rule_outbox;
DROP TABLE rule_audit_head;
DROP TABLE rule_audit;
DROP FUNCTION rule_audit_append_only();
DROP TABLE rule_approvals;
DROP TABLE rule_versions;
DROP FUNCTION rule_versions_immutable();
DROP TABLE rule_services;
