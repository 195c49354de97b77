-- +goose NO TRANSACTION
-- The ledger deletes transitions older than its retention
-- (LedgerOptions.TransitionRetention), oldest first, in bounded batches: this
-- index finds them without scanning the table. It is built concurrently, so
-- a large history does not block the ledger's writes while it builds; an
-- invalid index left by an interrupted build is dropped first.

-- +goose Up
DROP INDEX CONCURRENTLY IF EXISTS delivery_transitions_by_at;
CREATE INDEX CONCURRENTLY delivery_transitions_by_at ON delivery_transitions (at, id);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS delivery_transitions_by_at;
