package postgres

import (
	"context"
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

// ListTemplates implements ports.TemplateStore: newest first, without versions.
func (s *Templates) ListTemplates(ctx context.Context, orgID string) ([]ports.Template, error) {
	if !isUUID(orgID) {
		return []ports.Template{}, nil
	}
	rows, err := s.queries.ListTemplates(ctx, orgID)
	if err != nil {
		return nil, interpretError(err)
	}
	out := make([]ports.Template, len(rows))
	for i, r := range rows {
		out[i] = templateFromRow(r)
	}
	return out, nil
}

// GetTemplate implements ports.TemplateStore: the template and its versions, oldest first, in one round
// trip. Errors: not_found.
func (s *Templates) GetTemplate(ctx context.Context, orgID, id string) (ports.Template, error) {
	if !isUUID(orgID) || !isUUID(id) {
		return ports.Template{}, ports.NotFound("template not found")
	}
	var t ports.Template
	var versions []db.TemplateVersion
	err := runPipeline(ctx, s.pool,
		func(q *db.Queries) error {
			row, err := q.TemplateByID(ctx, db.TemplateByIDParams{OrganizationID: orgID, ID: id})
			t = templateFromRow(row)
			return err
		},
		func(q *db.Queries) (err error) {
			versions, err = q.TemplateVersions(ctx, db.TemplateVersionsParams{OrganizationID: orgID, TemplateID: id})
			return err
		})
	if err != nil {
		return ports.Template{}, interpretErrorFor("template", err)
	}
	t.Versions = make([]ports.TemplateVersion, len(versions))
	for i, v := range versions {
		t.Versions[i] = templateVersionFromRow(v)
	}
	return t, nil
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
