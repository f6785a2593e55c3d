-- name: MessageHTML :one
SELECT html_body FROM messages WHERE organization_id = @organization_id AND id = @id;

-- name: MessageHasEvent :one
SELECT EXISTS (SELECT 1 FROM events
               WHERE organization_id = @organization_id AND message_id = @message_id::uuid AND type = @type);

-- name: SetDomainTracking :one
-- A NULL setting leaves the column as it is.
UPDATE domains SET
    open_tracking = COALESCE(sqlc.narg(open_tracking)::boolean, open_tracking),
    click_tracking = COALESCE(sqlc.narg(click_tracking)::boolean, click_tracking)
WHERE organization_id = @organization_id AND id = @id
RETURNING *;
