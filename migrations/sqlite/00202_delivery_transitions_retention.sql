-- The ledger deletes transitions older than its retention
-- (LedgerOptions.TransitionRetention), oldest first, in bounded batches: this
-- index finds them without scanning the table.

-- +goose Up
CREATE INDEX delivery_transitions_by_at ON delivery_transitions (at, id);

-- +goose Down
DROP INDEX delivery_transitions_by_at;
