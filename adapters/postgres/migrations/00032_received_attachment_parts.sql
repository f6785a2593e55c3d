-- +goose Up
-- A received attachment is derived from the raw message it came in: part_path is its MIME section
-- (RFC 3501 numbering, as the inbound tier's parser assigned it) and sha256 the hex SHA-256 of its decoded
-- bytes, checked before they are served. Rows written before have blob_key (an object of their own) and
-- empty part_path and sha256; new rows have an empty blob_key.
ALTER TABLE received_attachments
    ADD COLUMN part_path text NOT NULL DEFAULT '',
    ADD COLUMN sha256    text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE received_attachments DROP COLUMN part_path, DROP COLUMN sha256;
