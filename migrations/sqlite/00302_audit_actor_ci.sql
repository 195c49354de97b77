-- The audit log's actor filter ignores case (ui/auth user names are unique
-- ignoring case, migration 00301: "alice" and "Alice" are one person), so
-- the rules store compares lower(actor) = lower(?). This expression index
-- serves that filter, newest first, on a large log. SQLite's lower() folds
-- ASCII only, which is every character a user name may hold.

-- +goose Up
CREATE INDEX rule_audit_actor_ci ON rule_audit (lower(actor), seq);

-- +goose Down
DROP INDEX rule_audit_actor_ci;
