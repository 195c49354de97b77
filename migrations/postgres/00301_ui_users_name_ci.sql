-- Web UI accounts (ui/auth): user names are unique ignoring case, as the
-- rules store compares people (versioning.SamePerson): "alice" and "Alice"
-- would be one person to four-eyes approval and two accounts here.
--
-- A database from before this file may already hold such names. The unique
-- index cannot be built over them, and this file must not fail on them, so
-- it then builds a plain index of the same name (for lookups) and warns;
-- ui/auth still refuses new names that clash ignoring case, under a table
-- lock. Once the clashing accounts are deleted, an operator can replace the
-- plain index with the unique one:
--   DROP INDEX ui_users_name_ci; CREATE UNIQUE INDEX ui_users_name_ci ON ui_users (lower(name));

-- +goose Up
-- +goose StatementBegin
DO $$
DECLARE
    clashes text;
BEGIN
    SELECT string_agg(names, '; ') INTO clashes FROM (
        SELECT string_agg(name, ', ' ORDER BY name) AS names
        FROM ui_users GROUP BY lower(name) HAVING count(*) > 1
    ) c;
    IF clashes IS NULL THEN
        CREATE UNIQUE INDEX ui_users_name_ci ON ui_users (lower(name));
    ELSE
        RAISE WARNING 'ui_users: user names equal ignoring case (%): delete all but one of each, then make index ui_users_name_ci unique', clashes;
        CREATE INDEX ui_users_name_ci ON ui_users (lower(name));
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP INDEX IF EXISTS ui_users_name_ci;
