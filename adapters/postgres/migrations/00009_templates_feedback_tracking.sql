-- +goose Up
-- Templates with append-only versions (SPEC §4.4), bounce and complaint records (SPEC §4.5), and open and
-- click tracking (per-domain settings, click fields on events).
CREATE TABLE templates (
    id              uuid        NOT NULL,
    organization_id uuid        NOT NULL,
    name            text        NOT NULL,
    current_version integer,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    CONSTRAINT templates_pkey PRIMARY KEY (id),
    -- Versions reference (organization_id, id), so a version can never hang off another tenant's template.
    CONSTRAINT templates_org_id_key UNIQUE (organization_id, id),
    CONSTRAINT templates_name_check CHECK (char_length(name) BETWEEN 1 AND 120),
    CONSTRAINT templates_organization_id_fkey FOREIGN KEY (organization_id) REFERENCES organizations (id)
);

CREATE INDEX templates_organization_id_created_at_idx ON templates (organization_id, created_at DESC, id DESC);

-- Versions are immutable once written. Creations on one template lock the template row and number the new
-- version "maximum + 1"; the unique key backs that up.
CREATE TABLE template_versions (
    id              uuid        NOT NULL,
    organization_id uuid        NOT NULL,
    template_id     uuid        NOT NULL,
    version         integer     NOT NULL,
    subject         text        NOT NULL,
    html_body       text        NOT NULL DEFAULT '',
    text_body       text        NOT NULL DEFAULT '',
    react_source    text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL,
    CONSTRAINT template_versions_pkey PRIMARY KEY (id),
    CONSTRAINT template_versions_template_version_key UNIQUE (template_id, version),
    CONSTRAINT template_versions_version_check CHECK (version >= 1),
    CONSTRAINT template_versions_subject_check CHECK (subject <> ''),
    CONSTRAINT template_versions_template_id_fkey FOREIGN KEY (organization_id, template_id)
        REFERENCES templates (organization_id, id) ON DELETE CASCADE
);

-- Bounces: from SMTP replies during delivery and from delivery status notifications (RFC 3464) that arrive
-- at the return path later. No foreign key to messages, like events: recording one never locks more than
-- the message row the writer already holds.
CREATE TABLE bounces (
    id              uuid        NOT NULL,
    organization_id uuid        NOT NULL,
    message_id      uuid        NOT NULL,
    recipient_id    uuid        NOT NULL,
    address         text        NOT NULL,
    type            text        NOT NULL,
    status          text        NOT NULL DEFAULT '',
    action          text        NOT NULL DEFAULT '',
    diagnostic_code text        NOT NULL DEFAULT '',
    remote_mta      text        NOT NULL DEFAULT '',
    reporting_mta   text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL,
    CONSTRAINT bounces_pkey PRIMARY KEY (id),
    CONSTRAINT bounces_type_check CHECK (type IN ('hard', 'soft'))
);

CREATE INDEX bounces_organization_id_created_at_idx ON bounces (organization_id, created_at DESC, id DESC);

-- Complaints from feedback reports (RFC 5965).
CREATE TABLE complaints (
    id              uuid        NOT NULL,
    organization_id uuid        NOT NULL,
    message_id      uuid        NOT NULL,
    recipient_id    uuid        NOT NULL,
    address         text        NOT NULL,
    feedback_type   text        NOT NULL,
    user_agent      text        NOT NULL DEFAULT '',
    reported_domain text        NOT NULL DEFAULT '',
    source_ip       text        NOT NULL DEFAULT '',
    arrival_date    timestamptz,
    created_at      timestamptz NOT NULL,
    CONSTRAINT complaints_pkey PRIMARY KEY (id)
);

CREATE INDEX complaints_organization_id_created_at_idx ON complaints (organization_id, created_at DESC, id DESC);

-- GET /v1/suppressions lists a tenant's rows newest first.
CREATE INDEX suppressions_organization_id_created_at_idx ON suppressions (organization_id, created_at DESC, id DESC);

ALTER TABLE domains
    ADD COLUMN open_tracking  boolean NOT NULL DEFAULT false,
    ADD COLUMN click_tracking boolean NOT NULL DEFAULT false;

-- email.clicked carries the link followed and its position (SPEC §6 data.url and data.link_id).
ALTER TABLE events
    ADD COLUMN url     text,
    ADD COLUMN link_id text;

-- +goose Down
ALTER TABLE events DROP COLUMN link_id, DROP COLUMN url;
ALTER TABLE domains DROP COLUMN click_tracking, DROP COLUMN open_tracking;
DROP INDEX suppressions_organization_id_created_at_idx;
DROP TABLE complaints;
DROP TABLE bounces;
DROP TABLE template_versions;
DROP TABLE templates;
