-- +goose Up
-- The RFC 6238 time step of the last accepted TOTP code, so that each code works once. It has a column of its
-- own (rather than living inside the sealed seed) because accepting a code must be one conditional UPDATE
-- (totp_last_step < the new step): two logins racing with one code then cannot both succeed.
ALTER TABLE users ADD COLUMN totp_last_step bigint NOT NULL DEFAULT 0;

-- POSTMILL_ADMIN_EMAILS grants admin at sign-up only while no user is an admin; this index answers that
-- question without reading the table.
CREATE INDEX users_is_admin_idx ON users (id) WHERE is_admin;

-- +goose Down
DROP INDEX users_is_admin_idx;
ALTER TABLE users DROP COLUMN totp_last_step;
