-- +goose Up
-- Inbound mail (SPEC §2, §3, §4.12). An inbound domain belongs to one organization and its name is unique
-- across all of them (inbound_domains_name_key, named in 409 bodies): the MX listener finds the owner of a
-- recipient's domain by name alone.
CREATE TABLE inbound_domains (
    id              uuid        NOT NULL,
    organization_id uuid        NOT NULL,
    name            text        NOT NULL,
    status          text        NOT NULL,
    mx_host         text        NOT NULL,
    mx_priority     integer     NOT NULL,
    verified_at     timestamptz,
    last_checked_at timestamptz,
    created_at      timestamptz NOT NULL,
    CONSTRAINT inbound_domains_pkey PRIMARY KEY (id),
    CONSTRAINT inbound_domains_name_key UNIQUE (name),
    CONSTRAINT inbound_domains_org_id_key UNIQUE (organization_id, id),
    CONSTRAINT inbound_domains_organization_id_fkey FOREIGN KEY (organization_id) REFERENCES organizations (id),
    CONSTRAINT inbound_domains_status_check CHECK (status IN ('pending', 'verified', 'failed', 'suspended'))
);

CREATE INDEX inbound_domains_organization_id_idx ON inbound_domains (organization_id, created_at DESC, id DESC);

-- Routing rules. A route references its domain together with the organization, so a route can never point
-- at another organization's domain; deleting the domain deletes its routes.
CREATE TABLE inbound_routes (
    id                uuid        NOT NULL,
    organization_id   uuid        NOT NULL,
    inbound_domain_id uuid        NOT NULL,
    match_type        text        NOT NULL,
    match_value       text        NOT NULL,
    action            text        NOT NULL,
    destination       text        NOT NULL,
    enabled           boolean     NOT NULL,
    priority          integer     NOT NULL,
    created_at        timestamptz NOT NULL,
    CONSTRAINT inbound_routes_pkey PRIMARY KEY (id),
    CONSTRAINT inbound_routes_domain_fkey FOREIGN KEY (organization_id, inbound_domain_id)
        REFERENCES inbound_domains (organization_id, id) ON DELETE CASCADE,
    CONSTRAINT inbound_routes_match_type_check CHECK (match_type IN ('exact', 'pattern', 'catch_all')),
    CONSTRAINT inbound_routes_action_check CHECK (action IN ('webhook', 'forward_email', 'store')),
    CONSTRAINT inbound_routes_priority_check CHECK (priority BETWEEN 0 AND 10000)
);

CREATE INDEX inbound_routes_domain_idx ON inbound_routes (organization_id, inbound_domain_id, created_at, id);

-- Received mail, one row per accepted envelope recipient. The raw message and attachment bytes live in the
-- blob store under raw_key and blob_key, which never leave the core. received_emails_dedupe_key keeps a
-- message a retrying sender delivers twice (same bytes, same recipient) stored once. inbound_domain_id has
-- no foreign key: mail already received is kept when its domain is deleted.
CREATE TABLE received_emails (
    id                uuid        NOT NULL,
    organization_id   uuid        NOT NULL,
    inbound_domain_id uuid        NOT NULL,
    rcpt              text        NOT NULL,
    mail_from         text        NOT NULL,
    header_from       text        NOT NULL,
    header_from_name  text        NOT NULL,
    to_addresses      text[]      NOT NULL,
    cc_addresses      text[]      NOT NULL,
    subject           text        NOT NULL,
    message_id        text        NOT NULL,
    in_reply_to       text,
    refs              text,
    size_bytes        bigint      NOT NULL,
    spam_status       text        NOT NULL,
    scan_status       text        NOT NULL,
    status            text        NOT NULL,
    route_id          uuid,
    route_action      text,
    forward_status    text,
    received_at       timestamptz NOT NULL,
    text_body         text        NOT NULL,
    html_body         text        NOT NULL,
    headers           jsonb       NOT NULL,
    raw_key           text        NOT NULL,
    dedupe_key        text        NOT NULL,
    CONSTRAINT received_emails_pkey PRIMARY KEY (id),
    CONSTRAINT received_emails_dedupe_key UNIQUE (organization_id, rcpt, dedupe_key),
    CONSTRAINT received_emails_org_id_key UNIQUE (organization_id, id),
    CONSTRAINT received_emails_organization_id_fkey FOREIGN KEY (organization_id) REFERENCES organizations (id)
);

CREATE INDEX received_emails_organization_id_idx ON received_emails (organization_id, received_at DESC, id DESC);

CREATE TABLE received_attachments (
    id                uuid        NOT NULL,
    organization_id   uuid        NOT NULL,
    received_email_id uuid        NOT NULL,
    position          integer     NOT NULL,
    filename          text        NOT NULL,
    content_type      text        NOT NULL,
    size_bytes        bigint      NOT NULL,
    inline            boolean     NOT NULL,
    content_id        text        NOT NULL,
    scan_status       text        NOT NULL,
    scan_signature    text        NOT NULL,
    scanned_at        timestamptz,
    blob_key          text        NOT NULL,
    CONSTRAINT received_attachments_pkey PRIMARY KEY (id),
    CONSTRAINT received_attachments_email_fkey FOREIGN KEY (organization_id, received_email_id)
        REFERENCES received_emails (organization_id, id) ON DELETE CASCADE
);

CREATE INDEX received_attachments_email_idx ON received_attachments (organization_id, received_email_id, position);

-- +goose Down
DROP TABLE received_attachments;
DROP TABLE received_emails;
DROP TABLE inbound_routes;
DROP TABLE inbound_domains;
