-- name: InsertSMTPCredential :exec
INSERT INTO smtp_credentials (organization_id, id, username, password_hash, host, port, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7);

-- name: ListSMTPCredentials :many
SELECT * FROM smtp_credentials
WHERE organization_id = $1
ORDER BY created_at DESC, id DESC;

-- name: DeleteSMTPCredential :execrows
DELETE FROM smtp_credentials WHERE organization_id = $1 AND id = $2;

-- name: SMTPCredentialByUsername :one
SELECT * FROM smtp_credentials WHERE username = $1;
