-- The ledger records, per instance, when the instance sent (on its own
-- clock) the newest report or heartbeat whose running version it recorded,
-- so that an older message handled late (reports and heartbeats arrive on
-- separate subscriptions, shared between ledger replicas) does not move the
-- instance back to the version it ran before. Instances recorded before
-- this migration have none (NULL): their next message is taken as newer.

-- +goose Up
ALTER TABLE delivery_instances ADD COLUMN message_at timestamptz;

-- +goose Down
ALTER TABLE delivery_instances DROP COLUMN message_at;
