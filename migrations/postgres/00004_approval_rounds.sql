-- Approvals belong to a round of a proposal: a revision that changes the
-- ruleset starts a new round, and only the current round's approvals count.
-- Earlier rounds' approvals stay as history (nothing is deleted, so the
-- application role needs no DELETE on rule_approvals).

-- +goose Up
ALTER TABLE rule_versions ADD COLUMN approval_round integer NOT NULL DEFAULT 0 CHECK (approval_round >= 0);
ALTER TABLE rule_approvals ADD COLUMN round integer NOT NULL DEFAULT 0 CHECK (round >= 0);
ALTER TABLE rule_approvals DROP CONSTRAINT rule_approvals_pkey;
ALTER TABLE rule_approvals ADD PRIMARY KEY (service, number, round, approver);

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
        OR NEW.revision IS DISTINCT FROM OLD.revision OR NEW.revised_at IS DISTINCT FROM OLD.revised_at
        OR NEW.approval_round IS DISTINCT FROM OLD.approval_round)
       AND NOT (OLD.state = 'proposed' AND NEW.state = 'proposed' AND NEW.revision = OLD.revision + 1
                AND NEW.approval_round IN (OLD.approval_round, OLD.approval_round + 1)) THEN
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
-- Approvals of earlier rounds are dropped with their round.
DELETE FROM rule_approvals a USING rule_versions v
    WHERE v.service = a.service AND v.number = a.number AND a.round <> v.approval_round;
ALTER TABLE rule_approvals DROP CONSTRAINT rule_approvals_pkey;
ALTER TABLE rule_approvals ADD PRIMARY KEY (service, number, approver);
ALTER TABLE rule_approvals DROP COLUMN round;
ALTER TABLE rule_versions DROP COLUMN approval_round;
