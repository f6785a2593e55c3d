-- Every column sealed with the master secret, read and rewritten across organizations by the operator's
-- re-encryption after a key rotation. Each value's associated data is its row's id.

-- name: SealedTOTPSeeds :many
SELECT id, totp_secret AS sealed FROM users
WHERE totp_secret IS NOT NULL AND length(totp_secret) > 0 AND id > sqlc.arg(after_id)::uuid
ORDER BY id
LIMIT sqlc.arg(max_rows);

-- name: ReplaceTOTPSeed :execrows
UPDATE users SET totp_secret = sqlc.arg(replacement)::bytea
WHERE id = sqlc.arg(id) AND totp_secret = sqlc.arg(current)::bytea;

-- name: SealedDKIMKeys :many
SELECT id, dkim_private_key AS sealed FROM domains
WHERE length(dkim_private_key) > 0 AND id > sqlc.arg(after_id)::uuid
ORDER BY id
LIMIT sqlc.arg(max_rows);

-- name: ReplaceDKIMKey :execrows
UPDATE domains SET dkim_private_key = sqlc.arg(replacement)::bytea
WHERE id = sqlc.arg(id) AND dkim_private_key = sqlc.arg(current)::bytea;

-- name: SealedWebhookSecrets :many
SELECT id, secret AS sealed FROM webhook_endpoints
WHERE length(secret) > 0 AND id > sqlc.arg(after_id)::uuid
ORDER BY id
LIMIT sqlc.arg(max_rows);

-- name: ReplaceWebhookSecret :execrows
UPDATE webhook_endpoints SET secret = sqlc.arg(replacement)::bytea
WHERE id = sqlc.arg(id) AND secret = sqlc.arg(current)::bytea;
