-- +goose Up
-- A double opt-in topic may name the address its confirmation mails come from: with one, a subscription
-- left pending is mailed its confirmation link through the send path. Empty: the application mails it.
-- A constant default adds the column without rewriting the table.
ALTER TABLE topics ADD COLUMN confirm_from text NOT NULL DEFAULT '' CHECK (char_length(confirm_from) <= 320);

-- +goose Down
ALTER TABLE topics DROP COLUMN confirm_from;
