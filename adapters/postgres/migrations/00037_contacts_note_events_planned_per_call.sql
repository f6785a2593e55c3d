-- +goose Up
-- contacts_note_events (00017) ran its UPDATE with the plan PL/pgSQL cached on the connection's first call.
-- A connection that first noted events while an organization had few contacts, or before autovacuum had
-- analysed a table of contacts imported or restored in bulk, kept a plan that found contacts through
-- contacts_organization_id_consent_idx by organization alone and filtered the address: every contact of the
-- organization read for each event statement. During a broadcast to 100,000 contacts that was 40 s of the
-- database's time, more than any other statement. The UPDATE is now planned on each call (EXECUTE), from the
-- table's current size, so (organization, email) is found through contacts_organization_id_email_key. Planning
-- costs a fraction of a millisecond, so it is paid only by statements that insert an event the trigger acts
-- on for an organization that has contacts at all: transactional mail of an organization without contacts
-- pays for one index probe per statement. That probe names the organizations as an array parameter and the
-- function prices sequential scans, hash and merge joins out (as ProbePlans does for the send path), so
-- that whatever the statistics said when it was planned it is an index condition on organization_id: a semi
-- join of the events with contacts, planned while contacts was empty, walked a whole index of contacts for
-- an organization without any. JIT is off: a statement priced that way must never pay for compilation.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION contacts_note_events() RETURNS trigger LANGUAGE plpgsql
    SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off SET jit = off AS $$
DECLARE
    orgs uuid[];
BEGIN
    SELECT array_agg(DISTINCT organization_id) INTO orgs FROM new_events
     WHERE type IN ('email.sent', 'email.opened', 'email.clicked', 'email.bounced', 'email.complained');
    IF orgs IS NULL OR NOT EXISTS (SELECT 1 FROM contacts WHERE organization_id = ANY (orgs)) THEN
        RETURN NULL;
    END IF;
    EXECUTE $update$
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
     WHERE c.organization_id = x.organization_id AND c.email = x.email
    $update$;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION contacts_note_events() RETURNS trigger LANGUAGE plpgsql AS $$
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
