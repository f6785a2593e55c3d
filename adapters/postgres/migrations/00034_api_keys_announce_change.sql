-- +goose Up
-- Processes keep the API keys they read by prefix for a moment (core/account), so a change to a key that
-- decides whether a request is let in — revoked, deleted (also by the removal of its organization), its
-- hash or scopes replaced — is announced on postmill_changes as a change of the key's organization
-- (payload "organization <org id>", the form of migration 00015), whoever made it. Every process then
-- forgets that organization's keys and reads them again. last_used_at, written every second by every
-- process, is left out: it changes nothing a request is judged on.
-- +goose StatementBegin
CREATE FUNCTION announce_api_key_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('postmill_changes', 'organization ' || OLD.organization_id::text);
    ELSE
        PERFORM pg_notify('postmill_changes', 'organization ' || NEW.organization_id::text);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER api_keys_announce_change
    AFTER UPDATE OF revoked_at, token_hash, scopes, scopes_enforced, prefix ON api_keys
    FOR EACH ROW
    WHEN (OLD.revoked_at IS DISTINCT FROM NEW.revoked_at OR OLD.token_hash IS DISTINCT FROM NEW.token_hash
        OR OLD.scopes IS DISTINCT FROM NEW.scopes OR OLD.scopes_enforced IS DISTINCT FROM NEW.scopes_enforced
        OR OLD.prefix IS DISTINCT FROM NEW.prefix)
    EXECUTE FUNCTION announce_api_key_change();

CREATE TRIGGER api_keys_announce_delete
    AFTER DELETE ON api_keys
    FOR EACH ROW
    EXECUTE FUNCTION announce_api_key_change();

-- +goose Down
DROP TRIGGER api_keys_announce_delete ON api_keys;
DROP TRIGGER api_keys_announce_change ON api_keys;
DROP FUNCTION announce_api_key_change();
