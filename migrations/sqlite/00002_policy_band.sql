-- A service's auto-apply band, set by a person in its policy. All three
-- columns are NULL while none is set (the engine's configured band applies).

-- +goose Up
ALTER TABLE rule_services ADD COLUMN band_max_change_per_hour REAL
    CHECK (band_max_change_per_hour BETWEEN 0 AND 10);
ALTER TABLE rule_services ADD COLUMN band_floor REAL CHECK (band_floor >= 0);
ALTER TABLE rule_services ADD COLUMN band_ceiling REAL CHECK (band_ceiling >= 0);

-- +goose Down
ALTER TABLE rule_services DROP COLUMN band_ceiling;
ALTER TABLE rule_services DROP COLUMN band_floor;
ALTER TABLE rule_services DROP COLUMN band_max_change_per_hour;
