-- +goose Up
-- Accounts: users are global, organizations are the tenant boundary, memberships tie them together.
-- Constraint names are part of the API: SPEC §7 409 bodies name them (users_email_key,
-- organizations_slug_key), so every constraint is named explicitly rather than left to PostgreSQL.
CREATE TABLE organizations (
    id            uuid        NOT NULL,
    name          text        NOT NULL,
    slug          text        NOT NULL,
    paused        boolean     NOT NULL DEFAULT false,
    monthly_limit bigint      NOT NULL DEFAULT 0,
    warmup_cap    bigint      NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL,
    CONSTRAINT organizations_pkey PRIMARY KEY (id),
    CONSTRAINT organizations_slug_key UNIQUE (slug),
    CONSTRAINT organizations_monthly_limit_check CHECK (monthly_limit >= 0),
    CONSTRAINT organizations_warmup_cap_check CHECK (warmup_cap >= 0)
);

CREATE INDEX organizations_created_at_idx ON organizations (created_at DESC, id DESC);

CREATE TABLE users (
    id            uuid        NOT NULL,
    email         text        NOT NULL,
    password_hash text        NOT NULL,
    is_admin      boolean     NOT NULL DEFAULT false,
    totp_secret   bytea,
    totp_enabled  boolean     NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL,
    CONSTRAINT users_pkey PRIMARY KEY (id),
    CONSTRAINT users_email_key UNIQUE (email)
);

CREATE TABLE memberships (
    user_id         uuid        NOT NULL,
    organization_id uuid        NOT NULL,
    role            text        NOT NULL,
    created_at      timestamptz NOT NULL,
    CONSTRAINT memberships_pkey PRIMARY KEY (user_id, organization_id),
    CONSTRAINT memberships_user_id_fkey FOREIGN KEY (user_id) REFERENCES users (id),
    CONSTRAINT memberships_organization_id_fkey FOREIGN KEY (organization_id) REFERENCES organizations (id)
);

CREATE INDEX memberships_organization_id_idx ON memberships (organization_id);

-- Refresh tokens are looked up by the hash of the presented token, which is globally unique, so the hash
-- key is not scoped by organization.
CREATE TABLE refresh_tokens (
    id              uuid        NOT NULL,
    user_id         uuid        NOT NULL,
    organization_id uuid        NOT NULL,
    family_id       uuid        NOT NULL,
    token_hash      bytea       NOT NULL,
    expires_at      timestamptz NOT NULL,
    used_at         timestamptz,
    revoked_at      timestamptz,
    created_at      timestamptz NOT NULL,
    CONSTRAINT refresh_tokens_pkey PRIMARY KEY (id),
    CONSTRAINT refresh_tokens_token_hash_key UNIQUE (token_hash),
    CONSTRAINT refresh_tokens_user_id_fkey FOREIGN KEY (user_id) REFERENCES users (id),
    CONSTRAINT refresh_tokens_organization_id_fkey FOREIGN KEY (organization_id) REFERENCES organizations (id)
);

CREATE INDEX refresh_tokens_family_id_idx ON refresh_tokens (family_id);

-- API keys authenticate by prefix before the organization is known (SPEC §5 rule 4), so the prefix is
-- unique across organizations.
CREATE TABLE api_keys (
    id              uuid        NOT NULL,
    organization_id uuid        NOT NULL,
    name            text        NOT NULL,
    prefix          text        NOT NULL,
    token_hash      bytea       NOT NULL,
    scopes          text[]      NOT NULL DEFAULT '{}',
    scopes_enforced boolean     NOT NULL DEFAULT true,
    last_used_at    timestamptz,
    revoked_at      timestamptz,
    created_at      timestamptz NOT NULL,
    CONSTRAINT api_keys_pkey PRIMARY KEY (id),
    CONSTRAINT api_keys_prefix_key UNIQUE (prefix),
    CONSTRAINT api_keys_organization_id_fkey FOREIGN KEY (organization_id) REFERENCES organizations (id)
);

CREATE INDEX api_keys_organization_id_created_at_idx ON api_keys (organization_id, created_at DESC);

-- SMTP AUTH presents only a username, so usernames are unique across organizations.
CREATE TABLE smtp_credentials (
    id              uuid        NOT NULL,
    organization_id uuid        NOT NULL,
    username        text        NOT NULL,
    password_hash   text        NOT NULL,
    host            text        NOT NULL,
    port            integer     NOT NULL,
    created_at      timestamptz NOT NULL,
    CONSTRAINT smtp_credentials_pkey PRIMARY KEY (id),
    CONSTRAINT smtp_credentials_username_key UNIQUE (username),
    CONSTRAINT smtp_credentials_organization_id_fkey FOREIGN KEY (organization_id) REFERENCES organizations (id),
    CONSTRAINT smtp_credentials_port_check CHECK (port BETWEEN 1 AND 65535)
);

CREATE INDEX smtp_credentials_organization_id_created_at_idx ON smtp_credentials (organization_id, created_at DESC);

-- +goose Down
DROP TABLE smtp_credentials;
DROP TABLE api_keys;
DROP TABLE refresh_tokens;
DROP TABLE memberships;
DROP TABLE users;
DROP TABLE organizations;
