-- name: InsertUser :exec
INSERT INTO users (id, email, password_hash, is_admin, totp_secret, totp_enabled, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7);

-- name: InsertOrganization :exec
INSERT INTO organizations (id, name, slug, paused, monthly_limit, warmup_cap, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7);

-- name: InsertMembership :exec
INSERT INTO memberships (organization_id, user_id, role, created_at)
VALUES ($1, $2, $3, $4);

-- name: UserByEmail :one
SELECT * FROM users WHERE email = $1;

-- name: UserByID :one
SELECT * FROM users WHERE id = $1;

-- name: MembershipsByUser :many
SELECT * FROM memberships
WHERE user_id = $1
ORDER BY created_at, organization_id;

-- name: SetUserTOTP :execrows
UPDATE users SET totp_secret = $2, totp_enabled = $3 WHERE id = $1;

-- name: InsertRefreshToken :exec
INSERT INTO refresh_tokens (organization_id, id, user_id, family_id, token_hash, expires_at, used_at, revoked_at, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9);

-- name: ConsumeRefreshToken :one
UPDATE refresh_tokens SET used_at = $2
WHERE token_hash = $1 AND used_at IS NULL AND revoked_at IS NULL
RETURNING *;

-- name: RefreshTokenByHash :one
SELECT * FROM refresh_tokens WHERE token_hash = $1;

-- name: RevokeRefreshFamily :exec
UPDATE refresh_tokens SET revoked_at = $2
WHERE family_id = $1 AND revoked_at IS NULL;
