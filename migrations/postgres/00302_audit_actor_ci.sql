-- The audit log's actor filter ignores case (ui/auth user names are unique
-- ignoring case, migration 00301: "alice" and "Alice" are one person), so
-- the rules store compares lower(actor) = lower($1). This index serves that
-- filter, newest first, on a large log.
--
-- Built CONCURRENTLY so that appends to the log (every rule change) are not
-- blocked while it builds; that cannot run in a transaction. A build that
-- failed half way leaves an invalid index behind and goose does not record
-- this file, so the next start drops it first and builds it again.

-- +goose NO TRANSACTION
-- +goose Up
DROP INDEX CONCURRENTLY IF EXISTS rule_audit_actor_ci;
CREATE INDEX CONCURRENTLY rule_audit_actor_ci ON rule_audit (lower(actor), seq);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS rule_audit_actor_ci;
