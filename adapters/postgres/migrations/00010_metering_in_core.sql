-- +goose Up
-- The send path's metering rule (what a send counts, under which limits, and which refusal a send over one
-- gets) is the core's (core/sending/meter.go); the store only meters what the core decided, atomically, with
-- the conditional updates LockUsageMeters and MeterSend of queries/messages.sql. accept_messages, which made
-- those decisions in PL/pgSQL, goes, and lock_usage_meter, which only it called, with it.
DROP FUNCTION accept_messages(uuid, date, date, uuid[], text[], bigint[], bigint[], bigint[]);
DROP FUNCTION lock_usage_meter(uuid, text, date);

-- +goose Down
-- The functions as migration 00005 created them.
-- lock_usage_meter locks one usage row (creating it at 0 when absent) and returns its value. Every caller
-- locks an organization's month row before its day row, so two transactions never deadlock on them. Creating
-- the row is what lets the very first sends of a period wait for each other too; a period whose only sends
-- were refused keeps its row at 0, which reads like an absent one.
-- +goose StatementBegin
CREATE FUNCTION lock_usage_meter(p_organization_id uuid, p_metric text, p_period date) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_value bigint;
BEGIN
    SELECT um.value INTO v_value FROM usage_meters um
    WHERE um.organization_id = p_organization_id AND um.metric = p_metric AND um.period_start = p_period
    FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO usage_meters (organization_id, metric, period_start, value)
        VALUES (p_organization_id, p_metric, p_period, 0)
        ON CONFLICT DO NOTHING;
        SELECT um.value INTO v_value FROM usage_meters um
        WHERE um.organization_id = p_organization_id AND um.metric = p_metric AND um.period_start = p_period
        FOR UPDATE;
    END IF;
    RETURN v_value;
END
$$;
-- +goose StatementEnd

-- accept_messages decides, inside the send transaction, the fate of messages the same transaction has just
-- tried to insert (several concurrent sends of one organization and day are written together):
--   existing    the insert was skipped because the idempotency key belongs to another message, which is
--               returned (existing_id, existing_status); nothing is metered for it;
--   plan_limit  the monthly allowance (metric emails_sent, period p_month) would be passed;
--   warmup_cap  the daily warm-up cap (metric emails_sent_daily, period p_day) would be passed;
--   created     metered and kept;
--   retry       the key's owner vanished within this transaction (it was refused): send it again alone.
-- Limits of 0 mean none (still counted). Messages are taken in array order, so earlier sends get the
-- allowance first. Refused messages are deleted again, so the caller's conditional inserts of their
-- recipients, events and jobs write nothing. The usage rows are locked only when something is metered, and
-- stay locked until the transaction ends: that is what keeps concurrent transactions from passing a limit.
-- +goose StatementBegin
CREATE FUNCTION accept_messages(p_organization_id uuid, p_month date, p_day date, p_ids uuid[],
                                p_idempotency_keys text[], p_units bigint[], p_monthly_limits bigint[],
                                p_daily_caps bigint[])
RETURNS TABLE (message_id uuid, outcome text, existing_id uuid, existing_status text)
LANGUAGE plpgsql AS $$
DECLARE
    v_month   bigint;
    v_day     bigint;
    v_metered bigint := 0;
    v_refused uuid[] := '{}';
BEGIN
    FOR i IN 1 .. COALESCE(array_length(p_ids, 1), 0) LOOP
        message_id := p_ids[i];
        existing_id := NULL;
        existing_status := NULL;
        IF NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = p_ids[i]) THEN
            SELECT m.id, m.status INTO existing_id, existing_status FROM messages m
            WHERE m.organization_id = p_organization_id AND m.idempotency_key = p_idempotency_keys[i]
              AND m.id <> ALL (v_refused);
            outcome := CASE WHEN existing_id IS NULL THEN 'retry' ELSE 'existing' END;
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF p_units[i] > 0 THEN
            IF v_month IS NULL THEN
                v_month := lock_usage_meter(p_organization_id, 'emails_sent', p_month);
                v_day := lock_usage_meter(p_organization_id, 'emails_sent_daily', p_day);
            END IF;
            IF p_monthly_limits[i] > 0 AND v_month + p_units[i] > p_monthly_limits[i] THEN
                outcome := 'plan_limit';
            ELSIF p_daily_caps[i] > 0 AND v_day + p_units[i] > p_daily_caps[i] THEN
                outcome := 'warmup_cap';
            ELSE
                v_month := v_month + p_units[i];
                v_day := v_day + p_units[i];
                v_metered := v_metered + p_units[i];
                outcome := 'created';
            END IF;
            IF outcome <> 'created' THEN
                v_refused := v_refused || p_ids[i];
            END IF;
        ELSE
            outcome := 'created';
        END IF;
        RETURN NEXT;
    END LOOP;
    IF v_metered > 0 THEN
        UPDATE usage_meters um SET value = um.value + v_metered
        WHERE um.organization_id = p_organization_id
          AND ((um.metric = 'emails_sent' AND um.period_start = p_month)
            OR (um.metric = 'emails_sent_daily' AND um.period_start = p_day));
    END IF;
    IF cardinality(v_refused) > 0 THEN
        DELETE FROM messages m WHERE m.id = ANY (v_refused);
    END IF;
END
$$;
-- +goose StatementEnd
