-- Web UI accounts (ui/auth): local users, browser sessions and API tokens.
-- Times are Unix milliseconds (UTC) so both dialects read them the same way.
-- Secrets are never stored: sessions and tokens by their SHA-256.

-- +goose Up
CREATE TABLE ui_users (
    name          text PRIMARY KEY,
    password_hash text NOT NULL,
    roles         text NOT NULL,
    must_change   integer NOT NULL DEFAULT 0,
    created_ms    bigint NOT NULL,
    updated_ms    bigint NOT NULL
);

CREATE TABLE ui_sessions (
    id_hash    text PRIMARY KEY,
    username   text NOT NULL REFERENCES ui_users (name) ON DELETE CASCADE,
    csrf       text NOT NULL,
    created_ms bigint NOT NULL,
    expires_ms bigint NOT NULL
);
CREATE INDEX ui_sessions_username ON ui_sessions (username);

CREATE TABLE ui_tokens (
    id          text PRIMARY KEY,
    secret_hash text NOT NULL,
    username    text NOT NULL REFERENCES ui_users (name) ON DELETE CASCADE,
    label       text NOT NULL,
    scopes      text NOT NULL,
    created_ms  bigint NOT NULL,
    expires_ms  bigint NOT NULL DEFAULT 0,
    revoked_ms  bigint NOT NULL DEFAULT 0
);
CREATE INDEX ui_tokens_username ON ui_tokens (username);

-- +goose Down
DROP TABLE ui_tokens;
DROP TABLE ui_sessions;
DROP TABLE ui_users;
