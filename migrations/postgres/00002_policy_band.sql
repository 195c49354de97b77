-- A service's auto-apply band, set by a person in its policy. All three
-- columns are NULL while none is set (the engine's configured band applies).

-- +goose Up
ALTER TABLE rule_services
    ADD COLUMN band_max_change_per_hour double precision,
    ADD COLUMN band_floor               double precision,
    ADD COLUMN band_ceiling             double precision,
    ADD CONSTRAINT rule_services_band_complete CHECK (
        (band_max_change_per_hour IS NULL AND band_floor IS NULL AND band_ceiling IS NULL)
        OR (band_max_change_per_hour IS NOT NULL AND band_floor IS NOT NULL AND band_ceiling IS NOT NULL)),
    ADD CONSTRAINT rule_services_band_range CHECK (
        band_max_change_per_hour BETWEEN 0 AND 10 AND band_floor >= 0 AND band_ceiling >= 0);

-- +goose Down
ALTER TABLE rule_services
    DROP CONSTRAINT rule_services_band_range,
    DROP CONSTRAINT rule_services_band_complete,
    DROP COLUMN band_ceiling,
    DROP COLUMN band_floor,
    DROP COLUMN band_max_change_per_hour;
