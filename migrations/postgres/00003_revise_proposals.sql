-- Open proposals are revised in place: same number, new content, reason and
-- evidence, a revision counter and the time of the last revision. A
-- version's content may change only while it stays proposed, and only with
-- its revision counter going up by one; provenance never changes.

-- +goose Up
ALTER TABLE rule_versions
    ADD COLUMN revision   integer NOT NULL DEFAULT 0 CHECK (revision >= 0),
    ADD COLUMN revised_at timestamptz;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION rule_versions_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'rule_versions rows are never deleted'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NEW.service IS DISTINCT FROM OLD.service OR NEW.number IS DISTINCT FROM OLD.number
       OR NEW.parent IS DISTINCT FROM OLD.parent OR NEW.author IS DISTINCT FROM OLD.author
       OR NEW.source IS DISTINCT FROM OLD.source OR NEW.rollback_of IS DISTINCT FROM OLD.rollback_of
       OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        RAISE EXCEPTION 'rule_versions provenance is immutable'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF (NEW.content IS DISTINCT FROM OLD.content OR NEW.checksum IS DISTINCT FROM OLD.checksum
        OR NEW.reason IS DISTINCT FROM OLD.reason OR NEW.evidence IS DISTINCT FROM OLD.evidence
        OR NEW.revision IS DISTINCT FROM OLD.revision OR NEW.revised_at IS DISTINCT FROM OLD.revised_at)
       AND NOT (OLD.state = 'proposed' AND NEW.state = 'proposed' AND NEW.revision = OLD.revision + 1) THEN
        RAISE EXCEPTION 'rule_versions content is immutable except by revising an open proposal'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION rule_versions_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
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
ALTER TABLE rule_versions DROP COLUMN revised_at, DROP COLUMN revision;
