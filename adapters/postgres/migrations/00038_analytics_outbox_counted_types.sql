-- +goose Up
-- analytics_outbox_add (00022) queued every new event for the analytics tier, though the tier counts only the
-- event types of analytics_rollups' columns: email.queued (one of a sent message's three events),
-- email.scheduled, email.cancelled, email.received and the domain events were copied, stored in
-- analytics_events and rolled up as zeros. The outbox now takes only the counted types, the list
-- ports.AnalyticsEventTypes holds (TestAnalyticsOutboxCountedTypes compares the two).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION analytics_outbox_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO analytics_outbox (id)
    SELECT id FROM new_events
     WHERE type IN ('email.sent', 'email.delivered', 'email.bounced', 'email.complained', 'email.opened',
                    'email.clicked', 'email.failed', 'email.delivery_delayed')
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION analytics_outbox_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO analytics_outbox (id) SELECT id FROM new_events ON CONFLICT DO NOTHING;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
