-- +goose Up
-- Sending domains (SPEC §2, §3, §4.3). The DKIM private key is stored sealed (encrypted by the core before
-- it reaches the store); the public key is what the DKIM record publishes. domains_org_name_key is named
-- in 409 bodies. domains_org_id_key lets tenant rows reference a domain together with its organization,
-- so a row of one organization can never point at another organization's domain.
CREATE TABLE domains (
    id               uuid        NOT NULL,
    organization_id  uuid        NOT NULL,
    name             text        NOT NULL,
    status           text        NOT NULL DEFAULT 'pending',
    region           text        NOT NULL DEFAULT 'us-east-1',
    dkim_selector    text        NOT NULL,
    dkim_private_key bytea       NOT NULL,
    dkim_public_key  text        NOT NULL,
    verified_at      timestamptz,
    created_at       timestamptz NOT NULL,
    CONSTRAINT domains_pkey PRIMARY KEY (id),
    CONSTRAINT domains_org_name_key UNIQUE (organization_id, name),
    CONSTRAINT domains_org_id_key UNIQUE (organization_id, id),
    CONSTRAINT domains_organization_id_fkey FOREIGN KEY (organization_id) REFERENCES organizations (id),
    CONSTRAINT domains_status_check CHECK (status IN ('pending', 'verifying', 'failed', 'verified', 'suspended'))
);

CREATE INDEX domains_organization_id_created_at_idx ON domains (organization_id, created_at DESC, id DESC);

-- The records a domain owner publishes, with the result of the last check. position keeps the order in
-- which the core generated them (SPF, DKIM, DMARC, RETURN_PATH, TRACKING), so responses list them stably.
CREATE TABLE dns_records (
    id              uuid        NOT NULL,
    domain_id       uuid        NOT NULL,
    organization_id uuid        NOT NULL,
    position        integer     NOT NULL,
    type            text        NOT NULL,
    host            text        NOT NULL,
    value           text        NOT NULL,
    ttl             integer     NOT NULL,
    required        boolean     NOT NULL,
    verified        boolean     NOT NULL DEFAULT false,
    checked_at      timestamptz,
    CONSTRAINT dns_records_pkey PRIMARY KEY (id),
    CONSTRAINT dns_records_domain_position_key UNIQUE (domain_id, position),
    CONSTRAINT dns_records_domain_id_fkey FOREIGN KEY (organization_id, domain_id)
        REFERENCES domains (organization_id, id) ON DELETE CASCADE,
    CONSTRAINT dns_records_type_check CHECK (type IN ('SPF', 'DKIM', 'DMARC', 'RETURN_PATH', 'TRACKING')),
    CONSTRAINT dns_records_ttl_check CHECK (ttl >= 0)
);

-- +goose Down
DROP TABLE dns_records;
DROP TABLE domains;
