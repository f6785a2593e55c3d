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

-- name: SpendRefreshToken :one
-- Spends a token that is unused, unrevoked and unexpired at $2; the row lock it takes is held until the
-- transaction that stores the successor commits.
UPDATE refresh_tokens SET used_at = sqlc.arg(now)::timestamptz
WHERE token_hash = sqlc.arg(token_hash) AND used_at IS NULL AND revoked_at IS NULL
  AND expires_at > sqlc.arg(now)::timestamptz
RETURNING *;

-- name: RefreshFamilyByHash :one
SELECT family_id FROM refresh_tokens WHERE token_hash = $1;

-- name: LockRefreshFamily :exec
-- Serialises every rotation and revocation of one refresh family for the rest of the transaction. The
-- two-key form keeps these locks apart from the single-key ones of migrations.
SELECT pg_advisory_xact_lock(7301, hashtext(sqlc.arg(family_id)::text));

-- name: LockAdminBootstrap :exec
-- Serialises the sign-ups that ask for the admin bootstrap, so that only the first one becomes admin.
SELECT pg_advisory_xact_lock(7302, 0);

-- name: AnyAdmin :one
SELECT EXISTS (SELECT 1 FROM users WHERE is_admin);

-- name: SetUserAdmin :execrows
UPDATE users SET is_admin = $2 WHERE email = $1;

-- name: ClaimTOTPStep :execrows
UPDATE users SET totp_last_step = sqlc.arg(step) WHERE id = sqlc.arg(id) AND totp_last_step < sqlc.arg(step);

-- name: RefreshTokenByHash :one
SELECT * FROM refresh_tokens WHERE token_hash = $1;

-- name: RevokeRefreshFamily :exec
UPDATE refresh_tokens SET revoked_at = $2
WHERE family_id = $1 AND revoked_at IS NULL;
