-- Web UI accounts (ui/auth): user names are unique ignoring case, as the
-- rules store compares people (versioning.SamePerson): "alice" and "Alice"
-- would be one person to four-eyes approval and two accounts here.
--
-- A database from before this file may already hold such names, over which
-- a unique index cannot be built, and this file must not fail on them. So
-- triggers refuse a new name, or a renamed one, that equals another ignoring
-- case (SQLite runs one writer at a time, so the check and the write are
-- one step); names already there are left alone. lower() folds ASCII only,
-- which is every character a user name may hold.

-- +goose Up
CREATE INDEX ui_users_name_ci ON ui_users (lower(name));

-- +goose StatementBegin
CREATE TRIGGER ui_users_name_ci_insert BEFORE INSERT ON ui_users
WHEN EXISTS (SELECT 1 FROM ui_users WHERE lower(name) = lower(NEW.name))
BEGIN
    SELECT RAISE(ABORT, 'UNIQUE constraint failed: ui_users.name (ignoring case)');
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER ui_users_name_ci_update BEFORE UPDATE OF name ON ui_users
WHEN EXISTS (SELECT 1 FROM ui_users WHERE lower(name) = lower(NEW.name) AND name <> OLD.name)
BEGIN
    SELECT RAISE(ABORT, 'UNIQUE constraint failed: ui_users.name (ignoring case)');
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER ui_users_name_ci_update;
DROP TRIGGER ui_users_name_ci_insert;
DROP INDEX ui_users_name_ci;
