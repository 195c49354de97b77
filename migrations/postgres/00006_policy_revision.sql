-- A service's policy carries a revision, counting the changes made to it,
-- so that a read-modify-write of the policy (SetPolicy of a Policy read
-- with its Revision) is refused when another change came in between,
-- instead of silently reverting it. Policies set before this migration
-- start at revision 1.

-- +goose Up
ALTER TABLE rule_services
    ADD COLUMN policy_revision bigint NOT NULL DEFAULT 0 CHECK (policy_revision >= 0);
UPDATE rule_services SET policy_revision = 1 WHERE policy_updated_at IS NOT NULL;

-- +goose Down
ALTER TABLE rule_services DROP COLUMN policy_revision;
