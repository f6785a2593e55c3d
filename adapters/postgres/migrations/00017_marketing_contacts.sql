-- +goose Up
-- Marketing audiences (SPEC §2, §4.7-§4.9): contacts with their consent, topics a contact subscribes to
-- (optionally with double opt-in), and segments, a saved rule over contacts. Every row belongs to one
-- organization, and every reference between them carries the organization, so a subscription can never
-- join a contact of one tenant to a topic of another.
CREATE TABLE contacts (
    id              uuid        NOT NULL,
    organization_id uuid        NOT NULL,
    email           text        NOT NULL,
    first_name      text        NOT NULL DEFAULT '',
    last_name       text        NOT NULL DEFAULT '',
    locale          text        NOT NULL DEFAULT '',
    timezone        text        NOT NULL DEFAULT '',
    source          text        NOT NULL DEFAULT '',
    properties      jsonb       NOT NULL DEFAULT '{}'::jsonb,
    consent_status  text        NOT NULL DEFAULT 'subscribed',
    consent_source  text        NOT NULL DEFAULT '',
    consent_ip      text        NOT NULL DEFAULT '',
    consent_at      timestamptz,
    bounced         boolean     NOT NULL DEFAULT false,
    last_sent_at    timestamptz,
    last_active_at  timestamptz,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    CONSTRAINT contacts_pkey PRIMARY KEY (id),
    CONSTRAINT contacts_org_id_key UNIQUE (organization_id, id),
    CONSTRAINT contacts_organization_id_email_key UNIQUE (organization_id, email),
    CONSTRAINT contacts_email_check CHECK (char_length(email) BETWEEN 1 AND 320),
    CONSTRAINT contacts_consent_status_check CHECK (consent_status IN ('subscribed', 'unsubscribed', 'pending')),
    CONSTRAINT contacts_properties_check CHECK (jsonb_typeof(properties) = 'object'),
    CONSTRAINT contacts_organization_id_fkey FOREIGN KEY (organization_id) REFERENCES organizations (id)
);

-- Lists newest first; audiences page by id within one organization.
CREATE INDEX contacts_organization_id_created_at_idx ON contacts (organization_id, created_at DESC, id DESC);
CREATE INDEX contacts_organization_id_consent_idx ON contacts (organization_id, consent_status, id);
-- Segment rules on properties.<key> use the containment and key-existence operators.
CREATE INDEX contacts_properties_idx ON contacts USING gin (properties jsonb_path_ops);

CREATE TABLE topics (
    id              uuid        NOT NULL,
    organization_id uuid        NOT NULL,
    key             text        NOT NULL,
    name            text        NOT NULL,
    description     text        NOT NULL DEFAULT '',
    double_opt_in   boolean     NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    CONSTRAINT topics_pkey PRIMARY KEY (id),
    CONSTRAINT topics_org_id_key UNIQUE (organization_id, id),
    CONSTRAINT topics_organization_id_key_key UNIQUE (organization_id, key),
    CONSTRAINT topics_key_check CHECK (key ~ '^[a-z0-9][a-z0-9_-]{0,63}$'),
    CONSTRAINT topics_organization_id_fkey FOREIGN KEY (organization_id) REFERENCES organizations (id)
);

CREATE TABLE topic_subscriptions (
    organization_id uuid        NOT NULL,
    topic_id        uuid        NOT NULL,
    contact_id      uuid        NOT NULL,
    status          text        NOT NULL,
    consent_source  text        NOT NULL DEFAULT '',
    consent_ip      text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    confirmed_at    timestamptz,
    CONSTRAINT topic_subscriptions_pkey PRIMARY KEY (topic_id, contact_id),
    CONSTRAINT topic_subscriptions_status_check CHECK (status IN ('pending', 'subscribed', 'unsubscribed')),
    CONSTRAINT topic_subscriptions_topic_id_fkey FOREIGN KEY (organization_id, topic_id)
        REFERENCES topics (organization_id, id) ON DELETE CASCADE,
    CONSTRAINT topic_subscriptions_contact_id_fkey FOREIGN KEY (organization_id, contact_id)
        REFERENCES contacts (organization_id, id) ON DELETE CASCADE
);

-- A contact's topics (the preference page) and a topic's audience by contact id.
CREATE INDEX topic_subscriptions_contact_id_idx ON topic_subscriptions (contact_id);
CREATE INDEX topic_subscriptions_topic_status_idx ON topic_subscriptions (topic_id, status, contact_id);

CREATE TABLE segments (
    id              uuid        NOT NULL,
    organization_id uuid        NOT NULL,
    name            text        NOT NULL,
    description     text        NOT NULL DEFAULT '',
    rule            jsonb       NOT NULL,
    -- The rule compiled by the core (ports.PlanNode), read when a broadcast expands the segment.
    plan            jsonb       NOT NULL,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    CONSTRAINT segments_pkey PRIMARY KEY (id),
    CONSTRAINT segments_org_id_key UNIQUE (organization_id, id),
    CONSTRAINT segments_organization_id_fkey FOREIGN KEY (organization_id) REFERENCES organizations (id)
);

CREATE INDEX segments_organization_id_created_at_idx ON segments (organization_id, created_at DESC, id DESC);

-- Delivery outcomes and engagement keep contacts current in the same transaction that records them: an
-- email.sent moves last_sent_at, an open or a click last_active_at, a (permanent) email.bounced sets
-- bounced, and a complaint unsubscribes the contact. One set-based update per statement that inserts
-- events, matching contacts by (organization, address); events of addresses that are not contacts change
-- nothing.
-- +goose StatementBegin
CREATE FUNCTION contacts_note_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE contacts c
       SET last_sent_at   = CASE WHEN x.sent_at IS NULL THEN c.last_sent_at
                                 ELSE GREATEST(c.last_sent_at, x.sent_at) END,
           last_active_at = CASE WHEN x.active_at IS NULL THEN c.last_active_at
                                 ELSE GREATEST(c.last_active_at, x.active_at) END,
           bounced        = c.bounced OR x.bounced,
           consent_status = CASE WHEN x.complained THEN 'unsubscribed' ELSE c.consent_status END,
           consent_source = CASE WHEN x.complained THEN 'complaint' ELSE c.consent_source END,
           consent_at     = CASE WHEN x.complained THEN x.complained_at ELSE c.consent_at END
      FROM (SELECT r.organization_id, lower(r.address) AS email,
                   max(e.occurred_at) FILTER (WHERE e.type = 'email.sent') AS sent_at,
                   max(e.occurred_at) FILTER (WHERE e.type IN ('email.opened', 'email.clicked')) AS active_at,
                   bool_or(e.type = 'email.bounced') AS bounced,
                   bool_or(e.type = 'email.complained') AS complained,
                   max(e.occurred_at) FILTER (WHERE e.type = 'email.complained') AS complained_at
              FROM new_events e
              JOIN recipients r ON r.id = e.recipient_id AND r.organization_id = e.organization_id
             WHERE e.type IN ('email.sent', 'email.opened', 'email.clicked', 'email.bounced', 'email.complained')
             GROUP BY 1, 2) x
     WHERE c.organization_id = x.organization_id AND c.email = x.email;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER events_note_contacts AFTER INSERT ON events
    REFERENCING NEW TABLE AS new_events FOR EACH STATEMENT EXECUTE FUNCTION contacts_note_events();

-- +goose Down
DROP TRIGGER events_note_contacts ON events;
DROP FUNCTION contacts_note_events();
DROP TABLE segments;
DROP TABLE topic_subscriptions;
DROP TABLE topics;
DROP TABLE contacts;
