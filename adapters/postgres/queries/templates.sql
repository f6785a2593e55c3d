-- name: InsertTemplate :exec
INSERT INTO templates (id, organization_id, name, current_version, created_at, updated_at)
VALUES (@id, @organization_id, @name, NULL, @created_at, @created_at);

-- name: LockTemplate :one
-- Serialises version creation on one template: the next number is computed after this lock is held.
SELECT id FROM templates WHERE organization_id = @organization_id AND id = @id FOR NO KEY UPDATE;

-- name: InsertTemplateVersion :one
-- The version number is the template's current maximum plus one, computed in the statement that inserts
-- it, under LockTemplate's lock; the unique key template_versions_template_version_key backs that up. The
-- SELECT from templates scopes the insert to the organization: no row is written for another tenant's
-- template.
INSERT INTO template_versions (id, organization_id, template_id, version, subject, html_body, text_body,
    react_source, created_at)
SELECT @id, t.organization_id, t.id,
    COALESCE((SELECT max(v.version) FROM template_versions v WHERE v.template_id = t.id), 0) + 1,
    @subject, @html_body, @text_body, @react_source, @created_at
FROM templates t
WHERE t.organization_id = @organization_id AND t.id = @template_id
RETURNING *;

-- name: PublishTemplateVersion :one
-- Sets the published version only when that version exists on the template.
UPDATE templates t SET current_version = @version::integer, updated_at = @now
WHERE t.organization_id = @organization_id AND t.id = @id
  AND EXISTS (SELECT 1 FROM template_versions v WHERE v.template_id = t.id AND v.version = @version::integer)
RETURNING *;

-- name: TemplateByID :one
SELECT * FROM templates WHERE organization_id = @organization_id AND id = @id;

-- name: ListTemplates :many
-- Keyset paging newest first; the first page passes a cursor after every row.
SELECT * FROM templates
WHERE organization_id = @organization_id
  AND (created_at, id) < (@before_created_at::timestamptz, @before_id::uuid)
ORDER BY created_at DESC, id DESC
LIMIT @row_limit;

-- name: TemplateVersions :many
-- Keyset paging on the version number, newest first; the first page passes a number above every version.
SELECT * FROM template_versions
WHERE organization_id = @organization_id AND template_id = @template_id AND version < @before_version::int
ORDER BY version DESC
LIMIT @row_limit;

-- name: PublishedTemplateVersionID :one
-- The id alone: the send path's cache holds compiled versions by id, so a hit reads no bodies.
SELECT v.id FROM templates t
JOIN template_versions v ON v.template_id = t.id AND v.version = t.current_version
WHERE t.organization_id = @organization_id AND t.id = @id;

-- name: PublishedTemplateVersion :one
-- The version sends render: the template's current_version, in the organization.
SELECT v.* FROM templates t
JOIN template_versions v ON v.template_id = t.id AND v.version = t.current_version
WHERE t.organization_id = @organization_id AND t.id = @id;
