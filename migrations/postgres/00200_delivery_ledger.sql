-- The delivery ledger of rules/distribution: what each SDK instance runs.

-- +goose Up
-- The version meant for each service: stable for every instance, canary for
-- the instances the selector (JSON of watch.Selector) picks.
CREATE TABLE delivery_targets (
    service        text PRIMARY KEY,
    stable_version bigint NOT NULL DEFAULT 0,
    stable_at      timestamptz,
    canary_version bigint NOT NULL DEFAULT 0,
    canary_at      timestamptz,
    selector       text
);

-- One row per (service, instance): last report and heartbeat, current state.
CREATE TABLE delivery_instances (
    service         text NOT NULL,
    instance        text NOT NULL,
    labels          text NOT NULL DEFAULT '{}',
    running_version bigint NOT NULL DEFAULT 0,
    target_version  bigint NOT NULL DEFAULT 0,
    state           text NOT NULL,
    state_since     timestamptz NOT NULL,
    last_seen       timestamptz NOT NULL,
    heartbeat_ms    bigint NOT NULL DEFAULT 0,
    ack_version     bigint NOT NULL DEFAULT 0,
    nack_version    bigint NOT NULL DEFAULT 0,
    nack_reason     text NOT NULL DEFAULT '',
    nack_error      text NOT NULL DEFAULT '',
    nack_at         timestamptz,
    PRIMARY KEY (service, instance)
);

-- Every state change, append-only.
CREATE TABLE delivery_transitions (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    service         text NOT NULL,
    instance        text NOT NULL,
    from_state      text NOT NULL,
    to_state        text NOT NULL,
    target_version  bigint NOT NULL,
    running_version bigint NOT NULL,
    detail          text NOT NULL DEFAULT '',
    at              timestamptz NOT NULL
);
CREATE INDEX delivery_transitions_by_instance ON delivery_transitions (service, instance, id);

-- +goose Down
DROP TABLE delivery_transitions;
DROP TABLE delivery_instances;
DROP TABLE delivery_targets;
