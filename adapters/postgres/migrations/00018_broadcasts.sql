-- +goose Up
-- Broadcasts (SPEC §2, §3, §4.10): one marketing send to a segment or a topic, and the recipients the
-- expander wrote for it. Every broadcast message goes through the send path like any other email (its
-- messages row is the message); broadcast_recipients ties each contact of the audience to its message, or
-- records that the contact was suppressed. The expander's checkpoint (cursor, the last contact id done) is
-- moved in the same transaction that records a batch's recipients.
CREATE TABLE broadcasts (
    id              uuid        NOT NULL,
    organization_id uuid        NOT NULL,
    name            text        NOT NULL,
    subject         text        NOT NULL,
    from_address    text        NOT NULL,
    reply_to        text        NOT NULL DEFAULT '',
    html_body       text        NOT NULL DEFAULT '',
    text_body       text        NOT NULL DEFAULT '',
    template_id     uuid,
    segment_id      uuid,
    topic_id        uuid,
    scheduled_at    timestamptz,
    status          text        NOT NULL,
    cursor          text        NOT NULL DEFAULT '',
    paused_until    timestamptz,
    failure_reason  text        NOT NULL DEFAULT '',
    started_at      timestamptz,
    completed_at    timestamptz,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    CONSTRAINT broadcasts_pkey PRIMARY KEY (id),
    CONSTRAINT broadcasts_org_id_key UNIQUE (organization_id, id),
    CONSTRAINT broadcasts_status_check CHECK (status IN ('draft', 'scheduled', 'sending', 'sent', 'canceled', 'failed')),
    CONSTRAINT broadcasts_audience_check CHECK (segment_id IS NULL OR topic_id IS NULL),
    CONSTRAINT broadcasts_name_check CHECK (char_length(name) BETWEEN 1 AND 200),
    CONSTRAINT broadcasts_subject_check CHECK (char_length(subject) BETWEEN 1 AND 998),
    CONSTRAINT broadcasts_organization_id_fkey FOREIGN KEY (organization_id) REFERENCES organizations (id),
    CONSTRAINT broadcasts_segment_id_fkey FOREIGN KEY (organization_id, segment_id)
        REFERENCES segments (organization_id, id) ON DELETE SET NULL (segment_id),
    CONSTRAINT broadcasts_topic_id_fkey FOREIGN KEY (organization_id, topic_id)
        REFERENCES topics (organization_id, id) ON DELETE SET NULL (topic_id)
);

CREATE INDEX broadcasts_organization_id_created_at_idx ON broadcasts (organization_id, created_at DESC, id DESC);
-- The expander's work list: due scheduled broadcasts and those sending. Partial, so finished ones cost
-- nothing here.
CREATE INDEX broadcasts_active_idx ON broadcasts (status, scheduled_at) WHERE status IN ('scheduled', 'sending');

CREATE TABLE broadcast_recipients (
    organization_id uuid        NOT NULL,
    broadcast_id    uuid        NOT NULL,
    contact_id      uuid        NOT NULL,
    email           text        NOT NULL,
    message_id      uuid,
    status          text        NOT NULL DEFAULT '',
    unsubscribed_at timestamptz,
    created_at      timestamptz NOT NULL,
    CONSTRAINT broadcast_recipients_pkey PRIMARY KEY (broadcast_id, contact_id),
    CONSTRAINT broadcast_recipients_broadcast_id_fkey FOREIGN KEY (organization_id, broadcast_id)
        REFERENCES broadcasts (organization_id, id) ON DELETE CASCADE
);

-- GET /v1/broadcasts/{id}/recipients pages in the order recipients were written.
CREATE INDEX broadcast_recipients_order_idx ON broadcast_recipients (broadcast_id, created_at, contact_id);
CREATE INDEX broadcast_recipients_message_id_idx ON broadcast_recipients (message_id) WHERE message_id IS NOT NULL;

-- +goose Down
DROP TABLE broadcast_recipients;
DROP TABLE broadcasts;
