-- A counter per table the alerts managers of several replicas share: every
-- write of alert_silences, alert_acks or alert_states adds one to its row in
-- the same transaction, so that a manager reads a table again only when its
-- counter moved since its last read.

-- +goose Up
CREATE TABLE alert_shared_version (
    name    TEXT PRIMARY KEY,
    version INTEGER NOT NULL
);
INSERT INTO alert_shared_version (name, version) VALUES ('silences', 0), ('acks', 0), ('states', 0);

-- +goose Down
DROP TABLE alert_shared_version;
