package postgres

import (
	"context"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/postmill/postmill/adapters/postgres/internal/db"
	"github.com/postmill/postmill/ports"
)

var _ ports.TemplateStore = (*Templates)(nil)

// Templates is the PostgreSQL store of templates and their numbered versions (ports.TemplateStore). Safe for
// concurrent use.
type Templates struct{ shared }

// InsertTemplate implements ports.TemplateStore.
func (s *Templates) InsertTemplate(ctx context.Context, t ports.Template) error {
	at := t.CreatedAt
	if at.IsZero() {
		at = time.Now()
	}
	return interpretError(s.queries.InsertTemplate(ctx, db.InsertTemplateParams{
		ID: idOrNew(t.ID), OrganizationID: t.OrganizationID, Name: t.Name, CreatedAt: at,
	}))
}

// InsertTemplateVersion implements ports.TemplateStore. The template row is locked first, so concurrent
// creations on one template take turns and each computes max+1 after the previous one committed: numbers
// are distinct and gapless without retries. Errors: not_found when the template is not the organization's.
func (s *Templates) InsertTemplateVersion(ctx context.Context, orgID string, v ports.TemplateVersion) (ports.TemplateVersion, error) {
	if !isUUID(orgID) || !isUUID(v.TemplateID) {
		return ports.TemplateVersion{}, ports.NotFound("template not found")
	}
	at := v.CreatedAt
	if at.IsZero() {
		at = time.Now()
	}
	var out ports.TemplateVersion
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		return runPipeline(ctx, tx,
			func(q *db.Queries) error {
				_, err := q.LockTemplate(ctx, db.LockTemplateParams{OrganizationID: orgID, ID: v.TemplateID})
				return err
			},
			func(q *db.Queries) error {
				row, err := q.InsertTemplateVersion(ctx, db.InsertTemplateVersionParams{
					ID: idOrNew(v.ID), Subject: v.Subject, HtmlBody: v.HTML, TextBody: v.Text, ReactSource: v.ReactSource,
					CreatedAt: at, OrganizationID: orgID, TemplateID: v.TemplateID,
				})
				out = templateVersionFromRow(row)
				return err
			})
	})
	if err != nil {
		return ports.TemplateVersion{}, interpretErrorFor("template", err)
	}
	return out, nil
}

// PublishTemplateVersion implements ports.TemplateStore. Errors: not_found (no such template in the
// organization, or no such version of it).
func (s *Templates) PublishTemplateVersion(ctx context.Context, orgID, templateID string, version int, now time.Time) (ports.Template, error) {
	if !isUUID(orgID) || !isUUID(templateID) {
		return ports.Template{}, ports.NotFound("template not found")
	}
	row, err := s.queries.PublishTemplateVersion(ctx, db.PublishTemplateVersionParams{
		Version: clampInt32(version), Now: now, OrganizationID: orgID, ID: templateID,
	})
	if err == nil {
		return templateFromRow(row), nil
	}
	if ports.ErrorCode(interpretError(err)) != ports.CodeNotFound {
		return ports.Template{}, interpretError(err)
	}
	// Tell a missing template from a missing version, for the 404's message.
	if _, err := s.queries.TemplateByID(ctx, db.TemplateByIDParams{OrganizationID: orgID, ID: templateID}); err != nil {
		return ports.Template{}, interpretErrorFor("template", err)
	}
	return ports.Template{}, ports.NotFound("template version %d not found", version)
}

// ListTemplates implements ports.TemplateStore: newest first, without versions, keyset paging on
// (created_at, id).
func (s *Templates) ListTemplates(ctx context.Context, orgID string, q ports.PageQuery) (ports.Page[ports.Template], error) {
	limit, beforeAt, beforeID, err := listBounds(q)
	if err != nil {
		return ports.Page[ports.Template]{}, err
	}
	if !isUUID(orgID) {
		return ports.Page[ports.Template]{Data: []ports.Template{}}, nil
	}
	rows, err := s.queries.ListTemplates(ctx, db.ListTemplatesParams{
		OrganizationID: orgID, BeforeCreatedAt: beforeAt, BeforeID: beforeID, RowLimit: int32(limit + 1),
	})
	if err != nil {
		return ports.Page[ports.Template]{}, interpretError(err)
	}
	return pageOf(rows, limit, templateFromRow, func(r db.Template) (time.Time, string) { return r.CreatedAt, r.ID }), nil
}

// GetTemplate implements ports.TemplateStore: the template and its newest `versions` versions, oldest
// first, in one round trip. One more version is read to tell whether older ones exist. Errors: not_found.
func (s *Templates) GetTemplate(ctx context.Context, orgID, id string, versions int) (ports.Template, error) {
	if !isUUID(orgID) || !isUUID(id) {
		return ports.Template{}, ports.NotFound("template not found")
	}
	versions = max(versions, 0)
	var t ports.Template
	var rows []db.TemplateVersion
	err := runPipeline(ctx, s.pool,
		func(q *db.Queries) error {
			row, err := q.TemplateByID(ctx, db.TemplateByIDParams{OrganizationID: orgID, ID: id})
			t = templateFromRow(row)
			return err
		},
		func(q *db.Queries) (err error) {
			rows, err = q.TemplateVersions(ctx, db.TemplateVersionsParams{
				OrganizationID: orgID, TemplateID: id, BeforeVersion: math.MaxInt32, RowLimit: clampInt32(versions + 1),
			})
			return err
		})
	if err != nil {
		return ports.Template{}, interpretErrorFor("template", err)
	}
	if len(rows) > versions {
		rows, t.VersionsTruncated = rows[:versions], true
	}
	t.Versions = make([]ports.TemplateVersion, len(rows))
	for i, v := range rows {
		t.Versions[len(rows)-1-i] = templateVersionFromRow(v)
	}
	return t, nil
}

// ListTemplateVersions implements ports.TemplateStore: newest first, keyset paging on the version number.
// The template is read in the same round trip, so a template that is not the organization's is not_found
// rather than an empty page.
func (s *Templates) ListTemplateVersions(ctx context.Context, orgID, templateID string, q ports.PageQuery) (ports.Page[ports.TemplateVersion], error) {
	limit, before, err := versionBounds(q)
	if err != nil {
		return ports.Page[ports.TemplateVersion]{}, err
	}
	if !isUUID(orgID) || !isUUID(templateID) {
		return ports.Page[ports.TemplateVersion]{}, ports.NotFound("template not found")
	}
	var rows []db.TemplateVersion
	err = runPipeline(ctx, s.pool,
		func(q *db.Queries) error {
			_, err := q.TemplateByID(ctx, db.TemplateByIDParams{OrganizationID: orgID, ID: templateID})
			return err
		},
		func(q *db.Queries) (err error) {
			rows, err = q.TemplateVersions(ctx, db.TemplateVersionsParams{
				OrganizationID: orgID, TemplateID: templateID, BeforeVersion: before, RowLimit: int32(limit + 1),
			})
			return err
		})
	if err != nil {
		return ports.Page[ports.TemplateVersion]{}, interpretErrorFor("template", err)
	}
	page := ports.Page[ports.TemplateVersion]{Data: make([]ports.TemplateVersion, 0, min(len(rows), limit))}
	if len(rows) > limit {
		rows = rows[:limit]
		page.NextCursor = encodeVersionCursor(int(rows[limit-1].Version))
	}
	for _, r := range rows {
		page.Data = append(page.Data, templateVersionFromRow(r))
	}
	return page, nil
}

// PublishedTemplateVersion implements ports.TemplateStore. Errors: not_found (no such template, or none
// published).
func (s *Templates) PublishedTemplateVersion(ctx context.Context, orgID, templateID string) (ports.TemplateVersion, error) {
	if !isUUID(orgID) || !isUUID(templateID) {
		return ports.TemplateVersion{}, ports.NotFound("template not found")
	}
	row, err := s.queries.PublishedTemplateVersion(ctx, db.PublishedTemplateVersionParams{OrganizationID: orgID, ID: templateID})
	if err != nil {
		return ports.TemplateVersion{}, interpretErrorFor("published template", err)
	}
	return templateVersionFromRow(row), nil
}

// PublishedTemplateVersionID implements ports.TemplateStore. Errors: not_found.
func (s *Templates) PublishedTemplateVersionID(ctx context.Context, orgID, templateID string) (string, error) {
	if !isUUID(orgID) || !isUUID(templateID) {
		return "", ports.NotFound("template not found")
	}
	id, err := s.queries.PublishedTemplateVersionID(ctx, db.PublishedTemplateVersionIDParams{OrganizationID: orgID, ID: templateID})
	if err != nil {
		return "", interpretErrorFor("published template", err)
	}
	return id, nil
}

func templateFromRow(r db.Template) ports.Template {
	return ports.Template{
		ID:             r.ID,
		OrganizationID: r.OrganizationID,
		Name:           r.Name,
		CurrentVersion: intPtr(r.CurrentVersion),
		CreatedAt:      r.CreatedAt.UTC(),
		UpdatedAt:      r.UpdatedAt.UTC(),
	}
}

func templateVersionFromRow(r db.TemplateVersion) ports.TemplateVersion {
	return ports.TemplateVersion{
		ID:          r.ID,
		TemplateID:  r.TemplateID,
		Version:     int(r.Version),
		Subject:     r.Subject,
		HTML:        r.HtmlBody,
		Text:        r.TextBody,
		ReactSource: r.ReactSource,
		CreatedAt:   r.CreatedAt.UTC(),
	}
}

func intPtr(v pgtype.Int4) *int {
	if !v.Valid {
		return nil
	}
	n := int(v.Int32)
	return &n
}
