-- Open proposals are revised in place: same number, new content, reason and
-- evidence, a revision counter and the time of the last revision. A
-- version's content may change only while it stays proposed, and only with
-- its revision counter going up by one; provenance never changes.

-- +goose Up
ALTER TABLE rule_versions ADD COLUMN revision INTEGER NOT NULL DEFAULT 0 CHECK (revision >= 0);
ALTER TABLE rule_versions ADD COLUMN revised_at TIMESTAMP;

DROP TRIGGER rule_versions_immutable;

-- +goose StatementBegin
CREATE TRIGGER rule_versions_immutable BEFORE UPDATE OF
    service, number, parent, author, source, rollback_of, created_at
    ON rule_versions
BEGIN
    SELECT RAISE(ABORT, 'rule_versions provenance is immutable');
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER rule_versions_revise_only_open BEFORE UPDATE OF
    content, checksum, reason, evidence, revision, revised_at
    ON rule_versions
    WHEN NOT (OLD.state = 'proposed' AND NEW.state = 'proposed' AND NEW.revision = OLD.revision + 1)
BEGIN
    SELECT RAISE(ABORT, 'rule_versions content is immutable except by revising an open proposal');
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER rule_versions_revise_only_open;
DROP TRIGGER rule_versions_immutable;

-- +goose StatementBegin
CREATE TRIGGER rule_versions_immutable BEFORE UPDATE OF
    service, number, parent, content, checksum, author, source, reason, evidence, rollback_of, created_at
    ON rule_versions
BEGIN
    SELECT RAISE(ABORT, 'rule_versions content is immutable');
END;
-- +goose StatementEnd

ALTER TABLE rule_versions DROP COLUMN revised_at;
ALTER TABLE rule_versions DROP COLUMN revision;
