-- Approvals belong to a round of a proposal: a revision that changes the
-- ruleset starts a new round, and only the current round's approvals count.
-- Earlier rounds' approvals stay as history (nothing is deleted).

-- +goose Up
ALTER TABLE rule_versions ADD COLUMN approval_round INTEGER NOT NULL DEFAULT 0 CHECK (approval_round >= 0);

-- SQLite cannot change a primary key: rebuild the table (nothing refers to it).
CREATE TABLE rule_approvals_rounds (
    service  TEXT NOT NULL,
    number   INTEGER NOT NULL,
    round    INTEGER NOT NULL DEFAULT 0 CHECK (round >= 0),
    approver TEXT NOT NULL,
    comment  TEXT NOT NULL DEFAULT '',
    at       TIMESTAMP NOT NULL,
    PRIMARY KEY (service, number, round, approver),
    FOREIGN KEY (service, number) REFERENCES rule_versions (service, number)
) WITHOUT ROWID;
INSERT INTO rule_approvals_rounds (service, number, round, approver, comment, at)
    SELECT service, number, 0, approver, comment, at FROM rule_approvals;
DROP TABLE rule_approvals;
ALTER TABLE rule_approvals_rounds RENAME TO rule_approvals;

DROP TRIGGER rule_versions_revise_only_open;

-- +goose StatementBegin
CREATE TRIGGER rule_versions_revise_only_open BEFORE UPDATE OF
    content, checksum, reason, evidence, revision, revised_at, approval_round
    ON rule_versions
    WHEN NOT (OLD.state = 'proposed' AND NEW.state = 'proposed' AND NEW.revision = OLD.revision + 1
              AND NEW.approval_round IN (OLD.approval_round, OLD.approval_round + 1))
BEGIN
    SELECT RAISE(ABORT, 'rule_versions content is immutable except by revising an open proposal');
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER rule_versions_revise_only_open;

-- +goose StatementBegin
CREATE TRIGGER rule_versions_revise_only_open BEFORE UPDATE OF
    content, checksum, reason, evidence, revision, revised_at
    ON rule_versions
    WHEN NOT (OLD.state = 'proposed' AND NEW.state = 'proposed' AND NEW.revision = OLD.revision + 1)
BEGIN
    SELECT RAISE(ABORT, 'rule_versions content is immutable except by revising an open proposal');
END;
-- +goose StatementEnd

CREATE TABLE rule_approvals_single (
    service  TEXT NOT NULL,
    number   INTEGER NOT NULL,
    approver TEXT NOT NULL,
    comment  TEXT NOT NULL DEFAULT '',
    at       TIMESTAMP NOT NULL,
    PRIMARY KEY (service, number, approver),
    FOREIGN KEY (service, number) REFERENCES rule_versions (service, number)
) WITHOUT ROWID;
-- Approvals of earlier rounds are dropped with their round.
INSERT INTO rule_approvals_single (service, number, approver, comment, at)
    SELECT a.service, a.number, a.approver, a.comment, a.at FROM rule_approvals a
    JOIN rule_versions v ON v.service = a.service AND v.number = a.number
    WHERE a.round = v.approval_round;
DROP TABLE rule_approvals;
ALTER TABLE rule_approvals_single RENAME TO rule_approvals;
ALTER TABLE rule_versions DROP COLUMN approval_round;
